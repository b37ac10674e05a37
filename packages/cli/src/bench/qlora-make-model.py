#!/usr/bin/env python3
"""Random-weight HF checkpoints for the QLoRA benchmarks of issue 14 (run on the GPU machine).

  python3 qlora-make-model.py model 1b|7b <out_dir> [--tokenizer tokenizer.json] [--norm-scale S]
  python3 qlora-make-model.py corpus <file> [--kb 400]

`model`: the config through transformers (LlamaConfig for 1b, TinyLlama's shape; MistralConfig for 7b, Mistral
7B's shape), the weights drawn with torch on the GPU in bf16 (std 0.02, norms 1; no HF init, which would take
minutes on the host for 7B) and written with safetensors as shards of at most 4 GB plus
model.safetensors.index.json, as `save_pretrained` lays them out. `corpus`: a small text file of pseudo-random
words (fixed seed) to fine-tune on. `--norm-scale S`: the layers' RMSNorm weights are S instead of 1 (the final norm
stays 1), so the projections' inputs reach S times their usual size (3e4: beyond f16's range, as in
docs/PERFORMANCE.md's prefill with X beyond f16's range).
"""
import json
import os
import random
import shutil
import sys
import time

SHAPES = {
    # TinyLlama 1.1B
    "1b": dict(arch="llama", hidden=2048, inter=5632, layers=22, heads=32, kv=4, vocab=32000),
    # Mistral 7B (v0.3 and later: no sliding window)
    "7b": dict(arch="mistral", hidden=4096, inter=14336, layers=32, heads=32, kv=8, vocab=32000),
}
SHARD_BYTES = 4 << 30


def make_model(shape: str, out: str, tokenizer: str | None, norm_scale: float = 1.0) -> dict:
    import torch
    from safetensors.torch import save_file
    from transformers import LlamaConfig, MistralConfig

    s = SHAPES[shape]
    t0 = time.time()
    common = dict(
        vocab_size=s["vocab"], hidden_size=s["hidden"], intermediate_size=s["inter"], num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"], num_key_value_heads=s["kv"], max_position_embeddings=4096, rms_norm_eps=1e-5,
        tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
    )
    cfg = LlamaConfig(**common) if s["arch"] == "llama" else MistralConfig(sliding_window=None, **common)
    os.makedirs(out, exist_ok=True)
    cfg.save_pretrained(out)
    # the checkpoint's dtype, as save_pretrained of a bf16 model writes it
    with open(os.path.join(out, "config.json")) as f:
        c = json.load(f)
    c["torch_dtype"] = "bfloat16"
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    h, i, kvd = s["hidden"], s["inter"], s["kv"] * (s["hidden"] // s["heads"])
    names = [("model.embed_tokens.weight", (s["vocab"], h))]
    for l in range(s["layers"]):
        p = f"model.layers.{l}."
        names += [
            (p + "input_layernorm.weight", (h,)),
            (p + "self_attn.q_proj.weight", (h, h)),
            (p + "self_attn.k_proj.weight", (kvd, h)),
            (p + "self_attn.v_proj.weight", (kvd, h)),
            (p + "self_attn.o_proj.weight", (h, h)),
            (p + "post_attention_layernorm.weight", (h,)),
            (p + "mlp.gate_proj.weight", (i, h)),
            (p + "mlp.up_proj.weight", (i, h)),
            (p + "mlp.down_proj.weight", (h, i)),
        ]
    names += [("model.norm.weight", (h,)), ("lm_head.weight", (s["vocab"], h))]
    gen = torch.Generator(device="cuda").manual_seed(14)
    shards, cur, size, total = [], {}, 0, 0
    for name, shp in names:
        if name.endswith("layernorm.weight"):
            t = torch.full(shp, norm_scale, dtype=torch.bfloat16, device="cuda")
        elif name.endswith("norm.weight"):
            t = torch.ones(shp, dtype=torch.bfloat16, device="cuda")
        else:
            t = (torch.randn(shp, generator=gen, device="cuda", dtype=torch.float32) * 0.02).to(torch.bfloat16)
        n = t.numel() * 2
        if cur and size + n > SHARD_BYTES:
            shards.append(cur)
            cur, size = {}, 0
        cur[name] = t
        size += n
        total += n
    shards.append(cur)
    weight_map = {}
    for k, sh in enumerate(shards):
        fname = "model.safetensors" if len(shards) == 1 else f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file({n: t.cpu() for n, t in sh.items()}, os.path.join(out, fname), metadata={"format": "pt"})
        weight_map.update({n: fname for n in sh})
    if len(shards) > 1:
        with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    if tokenizer:
        shutil.copy(tokenizer, os.path.join(out, "tokenizer.json"))
    params = sum(int(torch.Size(shp).numel()) for _, shp in names)
    return {"shape": shape, "arch": s["arch"], "parameters": params, "bytes": total, "shards": len(shards), "seconds": round(time.time() - t0, 1)}


def make_corpus(path: str, kb: int) -> dict:
    rng = random.Random(14)
    words = ["the", "model", "weights", "quantized", "adapter", "learns", "a", "small", "rank", "update", "while",
             "base", "stays", "frozen", "in", "four", "bits", "gradient", "flows", "through", "dequantized", "matrix",
             "tokens", "per", "second", "memory", "peak", "layer", "norm", "attention", "heads", "keys", "values"]
    lines, n = [], 0
    while n < kb * 1024:
        line = " ".join(rng.choice(words) for _ in range(rng.randint(8, 24))) + ".\n"
        lines.append(line)
        n += len(line)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.writelines(lines)
    return {"corpus": path, "bytes": n}


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) >= 3 and a[0] == "model":
        tok = a[a.index("--tokenizer") + 1] if "--tokenizer" in a else None
        scale = float(a[a.index("--norm-scale") + 1]) if "--norm-scale" in a else 1.0
        print(json.dumps(make_model(a[1], a[2], tok, scale)))
    elif len(a) >= 2 and a[0] == "corpus":
        print(json.dumps(make_corpus(a[1], int(a[a.index("--kb") + 1]) if "--kb" in a else 400)))
    else:
        sys.exit(__doc__)
