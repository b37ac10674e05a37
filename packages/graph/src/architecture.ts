import type { Context } from '@rusty/backend';
import type { Tensor } from '@rusty/autograd';
import type { Attention, CacheSlot } from './attention';
import type { ModelConfig, ModelType } from './config';
import type { InitOptions } from './layers';
import type { GatedMLP } from './mlp';
import type { Module } from './module';

/** One decoder layer: hidden states [B, T, hidden] in and out; every architecture's has one attention and one MLP. */
export interface DecoderLayer extends Module {
  readonly selfAttn: Attention;
  readonly mlp: GatedMLP;
  forward(h: Tensor, invFreq: Tensor, cache?: CacheSlot): Tensor;
}

/**
 * Everything Rusty knows about one HF architecture, in one file per architecture (llama.ts, qwen3.ts, ...):
 * its config.json schema and validation, its decoder layer, its parameter names and shapes, its LoRA targets
 * and how it is saved. The registry (`registry.ts`) lists them; the loader, the CLI and the model derive
 * everything from it. The parts every architecture shares (embedding, final norm, LM head, rotary tables) are
 * built by `CausalLM`.
 */
export interface Architecture {
  /** HF `model_type`. */
  modelType: ModelType;
  /** HF model class (`architectures` in config.json): written on save, required (when present) on load. */
  className: string;
  /** Validate a config.json object (the registry already checked `model_type` / `architectures`). */
  parseConfig(raw: Record<string, unknown>, source: string): ModelConfig;
  /** The config.json object HF transformers loads back to the same model. */
  toJSON(c: ModelConfig): Record<string, unknown>;
  /** Decoder layer `index`. */
  createLayer(ctx: Context, c: ModelConfig, init: InitOptions, index: number): DecoderLayer;
  /** Parameter names (relative to `model.layers.<i>.`) and shapes of one decoder layer. */
  layerParameterShapes(c: ModelConfig): [string, number[]][];
  /** Module names that `--targets all` adapts with LoRA (PEFT's `target_modules`). */
  loraTargets: readonly string[];
}

/** The seven linear projections of a Llama-style layer. */
export const LINEAR_TARGETS = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] as const;
