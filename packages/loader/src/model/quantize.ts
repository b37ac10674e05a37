// Quantize at load and quantized safetensors files: the loader side of @rusty/backend's quantized formats.
import {
  ConfigError,
  DQ_BLOCK,
  FLOAT_DTYPES,
  formatFromSafetensors,
  formatOf,
  isFloat,
  quantLayout,
  quantSpec,
  ShapeError,
  storageBytes,
  uploadBytes,
  type Context,
  type DeviceTensor,
  type DType,
  type QuantFormat,
  type QuantSpec,
  type QuantTensor,
} from '@rusty/backend';
import { Linear, packQuantized, QuantLinear, type Module } from '@rusty/graph';
import { SafetensorsError } from '../errors';
import type { SafetensorsReader } from '../safetensors/read';
import type { SafetensorsDType } from '../safetensors/dtypes';
import { writeSafetensors, type SafetensorsTarget, type TensorToWrite } from '../safetensors/write';

/**
 * The safetensors `__metadata__` key of a quantized file. Its value is JSON ({@link QuantizationMetadata}); the
 * tensors of each quantized Linear `<m>` sit beside each other under HF's names:
 * - `<m>.weight`: the codes, row-major with each row zero-padded to whole blocks: int8 as `I8 [out, Kp]`, 4-bit
 *   formats as `U8 [out, Kp / 2]` (element 2j in the high nibble of byte j, as bitsandbytes);
 * - `<m>.weight_scale`: `F32 [out, nb]` (int8, nf4) or `F16 [out, nb]` (int4); with NF4 double quantization
 *   `U8 [out * nb]` codes of the dynamic map, plus `<m>.weight_scale_absmax` (`F32 [ceil(out * nb / 256)]`) and
 *   `<m>.weight_scale_offset` (`F32 [1]`);
 * - `<m>.bias` as stored.
 * Everything else (embeddings, norms, the LM head) is stored as in an ordinary checkpoint.
 */
export const QUANT_METADATA_KEY = 'rusty.quantization';

/** The JSON in {@link QUANT_METADATA_KEY}. */
export interface QuantizationMetadata {
  format: QuantFormat;
  /** 0: one scale per output row (int8). */
  group_size: number;
  double_quant: boolean;
  /** Quantized Linears by module name: `[out, in]` and the dtype the weight had before quantization. */
  modules: Record<string, { shape: [number, number]; source_dtype: DType }>;
}

const SCALE = '_scale';
const ABSMAX2 = '_scale_absmax';
const OFFSET = '_scale_offset';

/** Options of {@link quantizeAtLoad}. */
export interface QuantizeAtLoadOptions {
  /** Quantize the checkpoint's float Linear weights into this format (ignored for a file that is quantized). */
  spec?: QuantSpec;
  /** Linears to leave in their stored dtype (default: the LM head). */
  skip?: (name: string) => boolean;
}

const defaultSkip = (name: string) => name === 'lm_head' || name.endsWith('.lm_head');

/** Every Linear of a model (parent, child name, dotted name) that quantization targets. */
function targets(model: Module, skip: (n: string) => boolean): { parent: Module; child: string; name: string; linear: Linear }[] {
  const out = [];
  for (const [name, m] of model.namedModules())
    for (const [child, c] of m.namedChildren()) {
      const full = name ? `${name}.${child}` : child;
      if (c instanceof Linear && !skip(full)) out.push({ parent: m, child, name: full, linear: c });
    }
  return out;
}

/** The quantization of a checkpoint, from its metadata (null for an ordinary checkpoint). */
export function quantizationOf(ckpt: Pick<SafetensorsReader, 'metadata' | 'path'>): QuantizationMetadata | null {
  const raw = ckpt.metadata[QUANT_METADATA_KEY];
  if (raw === undefined) return null;
  let m: QuantizationMetadata;
  try {
    m = JSON.parse(raw) as QuantizationMetadata;
  } catch {
    throw new SafetensorsError(`${ckpt.path}: metadata '${QUANT_METADATA_KEY}' is not JSON`);
  }
  quantSpec(m.format, m.group_size, m.double_quant, `${ckpt.path}: metadata '${QUANT_METADATA_KEY}'`);
  if (typeof m.modules !== 'object' || !m.modules) throw new SafetensorsError(`${ckpt.path}: metadata '${QUANT_METADATA_KEY}' lists no modules`);
  return m;
}

/** The float format a checkpoint's weight is stored in (the format table's safetensors names). */
const stDType = (d: string, where: string): DType => {
  const f = formatFromSafetensors(d);
  if (!f || !isFloat(f)) throw new ConfigError(`${where}: a ${d} weight cannot be quantized (expected ${FLOAT_DTYPES.map((x) => formatOf(x).safetensors).join(', ')})`);
  return f;
};

/**
 * Replace the model's Linears by {@link QuantLinear}s while the weights stream in, one layer at a time: a
 * quantized file's codes and scales are uploaded as they are; an ordinary checkpoint's float weights
 * (`opts.spec`) are uploaded in their stored dtype, quantized on the GPU and released before the next one, so
 * the model never exists in f32. Biases stay ordinary parameters (the caller loads them). Returns the names of
 * the parameters this loaded (the caller skips them), or null when there was nothing to quantize.
 */
export async function quantizeAtLoad(ctx: Context, model: Module, ckpt: SafetensorsReader, opts: QuantizeAtLoadOptions = {}): Promise<Set<string> | null> {
  const meta = quantizationOf(ckpt);
  if (!meta && !opts.spec) return null;
  const spec = meta ? quantSpec(meta.format, meta.group_size, meta.double_quant) : opts.spec!;
  if (meta && opts.spec && (opts.spec.format !== spec.format || opts.spec.groupSize !== spec.groupSize))
    throw new ConfigError(`${ckpt.path}: the checkpoint is quantized as ${spec.format} (group ${spec.groupSize}); it cannot be re-quantized as ${opts.spec.format} (group ${opts.spec.groupSize})`);
  const loaded = new Set<string>();
  const list = meta ? targets(model, () => false).filter((t) => meta.modules[t.name]) : targets(model, opts.skip ?? defaultSkip);
  if (meta) {
    const missing = Object.keys(meta.modules).filter((n) => !list.some((t) => t.name === n));
    if (missing.length) throw new ShapeError(`${ckpt.path}: quantized modules ${missing.slice(0, 3).join(', ')} are not Linears of this model`);
  }
  const packed: QuantLinear[] = [];
  for (const t of list) {
    const wname = `${t.name}.weight`;
    const info = ckpt.tensors.get(wname);
    if (!info) continue; // the caller reports missing weights
    const [N, K] = [t.linear.outFeatures, t.linear.inFeatures];
    let q: QuantLinear;
    if (meta) {
      const m = meta.modules[t.name]!;
      if (m.shape[0] !== N || m.shape[1] !== K)
        throw new ShapeError(`${ckpt.path}: quantized '${wname}' is [${m.shape.join(', ')}], config.json implies [${N}, ${K}]`);
      q = new QuantLinear(ctx, await readQuantTensor(ctx, ckpt, wname, spec, N, K), t.linear.bias, m.source_dtype);
      for (const s of ['', SCALE, ABSMAX2, OFFSET]) loaded.add(wname + s);
    } else {
      if (info.shape.length !== 2 || info.shape[0] !== N || info.shape[1] !== K)
        throw new ShapeError(`${ckpt.path}: tensor '${wname}' has shape [${info.shape.join(', ')}], config.json implies [${N}, ${K}]`);
      const stored = stDType(info.dtype, `${ckpt.path}: '${wname}'`);
      const w = await ckpt.upload(ctx, wname, { dtype: stored });
      q = QuantLinear.fromWeight(ctx, w, spec, t.linear.bias);
      ctx.release(w.buffer);
      loaded.add(wname);
    }
    t.parent.registerModule(t.child, q);
    t.linear.weight.dispose();
    packed.push(q);
  }
  // one size-class rounding per arena of layers instead of per tensor (NF4 codes of a 5632 x 2048 weight: 6 MiB for 5.5)
  await packQuantized(ctx, packed);
  return loaded;
}

async function bytesOf(ckpt: SafetensorsReader, name: string, dtype: string, len: number): Promise<Uint8Array> {
  const info = ckpt.tensors.get(name);
  if (!info) throw new SafetensorsError(`${ckpt.path}: quantized weight needs '${name}', which is missing`);
  if (info.dtype !== dtype || info.byteLength !== len)
    throw new SafetensorsError(`${ckpt.path}: '${name}' is ${info.dtype} of ${info.byteLength} bytes; the quantization metadata implies ${dtype} of ${len} bytes`);
  const b = await ckpt.readBytes(name);
  if (b.byteLength % 4 === 0) return b;
  const padded = new Uint8Array(Math.ceil(b.byteLength / 4) * 4);
  padded.set(b);
  return padded;
}

/** Upload one quantized weight (codes, scales, double-quantization state) as stored in a quantized file. */
async function readQuantTensor(ctx: Context, ckpt: SafetensorsReader, wname: string, spec: QuantSpec, N: number, K: number): Promise<QuantTensor> {
  const l = quantLayout(spec, N, K);
  const codes = await bytesOf(ckpt, wname, spec.format === 'int8' ? 'I8' : 'U8', N * l.wpr * 4);
  const q: QuantTensor = { spec, layout: l, data: uploadBytes(ctx, codes, [N, l.wpr], 'u32'), scales: null as unknown as DeviceTensor };
  const L = N * l.nb;
  if (spec.doubleQuant) {
    q.scales = uploadBytes(ctx, await bytesOf(ckpt, wname + SCALE, 'U8', L), [Math.ceil(L / 4)], 'u32');
    q.absmax2 = uploadBytes(ctx, await bytesOf(ckpt, wname + ABSMAX2, 'F32', Math.ceil(L / DQ_BLOCK) * 4), [Math.ceil(L / DQ_BLOCK)], 'f32');
    q.offset = uploadBytes(ctx, await bytesOf(ckpt, wname + OFFSET, 'F32', 4), [1], 'f32');
  } else {
    const st = formatOf(l.scaleDtype).safetensors!;
    q.scales = uploadBytes(ctx, await bytesOf(ckpt, wname + SCALE, st, (L * formatOf(l.scaleDtype).bits) / 8), [N, l.nb], l.scaleDtype);
  }
  return q;
}


/** Raw bytes of a GPU tensor (whole words; `bytes` of them kept). */
async function gpuBytes(ctx: Context, t: DeviceTensor, bytes: number): Promise<Uint8Array> {
  const b = new Uint8Array(await ctx.read(t.buffer, storageBytes(t.dtype, t.shape.reduce((a, d) => a * d, 1))));
  return b.subarray(0, bytes);
}

/**
 * Write a model with quantized Linears as one safetensors file: the quantized weights as described at
 * {@link QUANT_METADATA_KEY}, every other parameter in its own dtype (LoRA A/B tensors left out: save adapters
 * with `saveLoraAdapter`). Tensors are read back from the GPU one at a time as the writer reaches them.
 */
export async function saveQuantized(model: Module, target: SafetensorsTarget, metadata: Record<string, string> = {}): Promise<void> {
  const ctx = model.ctx;
  const entries: [string, TensorToWrite][] = [];
  const modules: QuantizationMetadata['modules'] = {};
  let spec: QuantSpec | null = null;
  const quantWeights = new Set<string>();
  for (const [name, m] of model.namedModules()) {
    const base = m instanceof QuantLinear ? m : (m as unknown as { base?: unknown }).base instanceof QuantLinear ? ((m as unknown as { base: QuantLinear }).base) : null;
    if (!base) continue;
    const q = base.quant;
    if (spec && (spec.format !== q.spec.format || spec.groupSize !== q.spec.groupSize || !!spec.doubleQuant !== !!q.spec.doubleQuant))
      throw new ConfigError(`saveQuantized: '${name}' is ${q.spec.format}/${q.spec.groupSize}, other layers ${spec.format}/${spec.groupSize}; one file holds one format`);
    spec = q.spec;
    const { N, K, wpr, nb, scaleDtype } = q.layout;
    modules[name] = { shape: [N, K], source_dtype: base.sourceDtype };
    const w = `${name}.weight`;
    quantWeights.add(w);
    const codeShape = q.spec.format === 'int8' ? [N, wpr * 4] : [N, wpr * 4];
    entries.push([w, { dtype: q.spec.format === 'int8' ? 'I8' : 'U8', shape: codeShape, data: () => gpuBytes(ctx, q.data, N * wpr * 4) }]);
    const L = N * nb;
    if (q.spec.doubleQuant) {
      entries.push([w + SCALE, { dtype: 'U8', shape: [L], data: () => gpuBytes(ctx, q.scales, L) }]);
      entries.push([w + ABSMAX2, { dtype: 'F32', shape: [Math.ceil(L / DQ_BLOCK)], data: () => gpuBytes(ctx, q.absmax2!, Math.ceil(L / DQ_BLOCK) * 4) }]);
      entries.push([w + OFFSET, { dtype: 'F32', shape: [1], data: () => gpuBytes(ctx, q.offset!, 4) }]);
    } else
      entries.push([w + SCALE, { dtype: formatOf(scaleDtype).safetensors as SafetensorsDType, shape: [N, nb], data: () => gpuBytes(ctx, q.scales, (L * formatOf(scaleDtype).bits) / 8) }]);
  }
  if (!spec) throw new ConfigError('saveQuantized: the model has no quantized layers (save it as an ordinary checkpoint)');
  for (const [name, p] of model.namedParameters()) {
    if (quantWeights.has(name) || /\.lora_[AB]\.weight$/.test(name)) continue;
    const st = isFloat(p.dtype) ? (formatOf(p.dtype).safetensors as SafetensorsDType) : null;
    if (!st) throw new ConfigError(`saveQuantized: parameter '${name}' has dtype ${p.dtype}, which a checkpoint cannot hold`);
    entries.push([name, { dtype: st, shape: [...p.shape], data: () => gpuBytes(ctx, p.data, (p.size * formatOf(p.dtype).bits) / 8) }]);
  }
  const s = spec as QuantSpec;
  const qm: QuantizationMetadata = { format: s.format, group_size: s.groupSize, double_quant: !!s.doubleQuant, modules };
  await writeSafetensors(target, entries, { format: 'pt', ...metadata, [QUANT_METADATA_KEY]: JSON.stringify(qm) });
}

/** One line describing a quantized checkpoint's metadata (for `rusty inspect`), or null. */
export function describeQuantization(metadata: Readonly<Record<string, string>>): string | null {
  const raw = metadata[QUANT_METADATA_KEY];
  if (!raw) return null;
  try {
    const m = JSON.parse(raw) as QuantizationMetadata;
    const n = Object.keys(m.modules ?? {}).length;
    return `quantized: ${m.format}, ${m.group_size ? `blocks of ${m.group_size}` : 'one scale per row'}${m.double_quant ? ', double-quantized scales' : ''}; ${n} linear layer${n === 1 ? '' : 's'} (weights as codes, '<name>.weight_scale' beside them)`;
  } catch {
    return `quantized: unreadable metadata '${QUANT_METADATA_KEY}'`;
  }
}
