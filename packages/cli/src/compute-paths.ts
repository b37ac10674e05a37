// Which kernel paths an adapter gets, for `rusty devices`: asked of the backend's own selection functions (the ones
// the ops call), never decided here.
import { attentionTiles, chooseTcTile, flashAttentionTcPath, matmulPath, qtcPlan, qtcTuning, QUANT_GEMV_MAX_ROWS, quantRowsOnTensorCores, tcViaTN, tcWave, type Context, type DeviceTensor, type FloatDType, type TcTile } from '@rusty/backend';

/** How one kind of product runs on this adapter. */
export interface ComputePath {
  /** `tensor-cores`: f16 x f16 -> f32 on subgroup matrices; `portable`: the kernels every adapter runs. */
  path: 'tensor-cores' | 'portable';
  /** What runs: the fragment and tiles, or the portable kernels' arithmetic. */
  detail: string;
  /** Why the tensor cores are not used (portable paths only). */
  reason?: string;
}

/** The kernel paths of an adapter: matmul per operand dtype, attention (f16 q, k, v) per head dim. */
export interface ComputePaths {
  matmul: Record<FloatDType, ComputePath>;
  /** f32 x f32 at `--matmul-precision high` (three f16 tensor-core products per f32 product where possible). */
  f32High: ComputePath;
  /** f32 A x a frozen f32 weight whose values are 16-bit (a bf16 / f16 checkpoint loaded in f32) during a
   *  Trainer run: its exact f16 image on the tensor cores (the backend's matmul-f16-images.ts). */
  f32Frozen: ComputePath;
  /** By `D=<head dim>`; f32 and bf16 inputs always take the portable kernels. */
  attention: Record<string, ComputePath>;
  /** x times a quantized weight (int8 / int4 / NF4, `--quantize`) for a few rows (prefill of short prompts). */
  quantized: ComputePath;
}

const tileText = (t: TcTile): string => `${t.bm}x${t.bn}x${t.bk}`;

/** A large product (a 1.1B model's projection over 4 x 512 tokens) and a LoRA-sized one, for the tiles shown. */
const BIG = { M: 2048, N: 5632, batch: 1, transA: false, transB: false };
const SMALL = { M: 512, N: 256, batch: 1, transA: false, transB: false };
/** A square x W^T large enough that it may run as the TN product of both operands transposed (`tcViaTN`). */
const SQUARE_NT = { M: 4096, N: 4096, K: 4096, batch: 1, transA: false, transB: true, lda: 4096, ldb: 4096 };

const UNPACKED: Record<FloatDType, string> = {
  f32: 'f32 operands, f32 arithmetic',
  f16: 'f16 operands unpacked to f32 in the shader (half the memory traffic), f32 arithmetic',
  bf16: 'bf16 operands unpacked to f32 in the shader (half the memory traffic), f32 arithmetic',
};

function matmulOf(ctx: Context, dtype: FloatDType): ComputePath {
  const p = matmulPath(ctx, dtype, dtype, {}, 4096);
  if (p.tc) {
    const f = p.tc.frag;
    let tiles: string;
    try {
      tiles = `tiles ${tileText(chooseTcTile(p.tc, ctx.info.limits, BIG))} (2048 x 5632) / ${tileText(chooseTcTile(p.tc, ctx.info.limits, SMALL))} (512 x 256)`;
      // x W^T (NT) is planned in waves where the adapter's compute units are known
      const wave = tcWave(ctx);
      tiles += `; x W^T ${tileText(chooseTcTile(p.tc, ctx.info.limits, { ...BIG, transB: true }, wave))} (2048 x 5632, ${wave ? `waves of ${wave} tiles` : 'compute units unknown'})`;
      if (tcViaTN(SQUARE_NT, wave, chooseTcTile(p.tc, ctx.info.limits, SQUARE_NT, wave))) tiles += '; 4096^3 x W^T as the TN product of both operands transposed';
    } catch (e) {
      return { path: 'portable', detail: UNPACKED[dtype], reason: (e as Error).message };
    }
    return {
      path: 'tensor-cores',
      detail: `subgroup matrices ${f.M}x${f.N}x${f.K} ${f.componentType} -> ${f.resultComponentType}, subgroup size ${p.tc.subgroupSize}; ${tiles}`,
    };
  }
  return { path: 'portable', detail: UNPACKED[dtype], ...(p.reason ? { reason: p.reason } : {}) };
}

/** Head dims shown for attention (Llama 1B-8B: 64 and 128). */
const HEAD_DIMS = [64, 128];

const TC_REFUSAL = /^attention: tensorCores: true, but /;

function attentionOf(ctx: Context, D: number): ComputePath {
  // the op's own choice for f16 q, k, v of head dim D (it reads their dtypes and shapes only)
  const q = { dtype: 'f16', shape: [1, 1, 1, D] } as unknown as DeviceTensor;
  let reason: string;
  try {
    const p = flashAttentionTcPath(ctx, q, q, q, { tensorCores: true })!;
    const f = p.plan.frag;
    const block = (t: { nsg: number; b: number }) => `${t.nsg * f.M}x${t.b}`;
    return {
      path: 'tensor-cores',
      detail:
        `flash attention, Q K^T and P V on subgroup matrices ${f.M}x${f.N}x${f.K} ${f.componentType} -> ${f.resultComponentType}, softmax in f32; ` +
        `tiles fwd ${block(p.tiles.fwd)}, dK/dV ${block(p.tiles.dkdv)}, dQ ${block(p.tiles.dq)} (from stored dS ${block(p.tiles.dqds)})`,
    };
  } catch (e) {
    if (!TC_REFUSAL.test((e as Error).message)) throw e;
    reason = (e as Error).message.replace(TC_REFUSAL, '');
  }
  const t = attentionTiles(ctx, D);
  const s = (x: readonly number[]) => x.join('x');
  return { path: 'portable', detail: `flash attention, f32 arithmetic (f16/bf16 inputs unpacked); tiles fwd ${s(t.fwd)}, dK/dV ${s(t.dkdv)}, dQ ${s(t.dq)}`, reason };
}

/** f32 at precision 'high' runs where f16 x f16 takes the tensor cores (see the backend's matmul-f16x3.ts). */
function f32HighOf(f16: ComputePath): ComputePath {
  if (f16.path === 'portable') return { path: 'portable', detail: UNPACKED.f32, reason: f16.reason ?? 'no tensor cores' };
  return { path: 'tensor-cores', detail: `three f16 products per f32 product over 3K (about 22 bits), ${f16.detail}` };
}

/** f32 times a frozen 16-bit-valued weight takes its f16 image where f16 x f16 takes the tensor cores. */
function f32FrozenOf(f16: ComputePath): ComputePath {
  if (f16.path === 'portable') return { path: 'portable', detail: UNPACKED.f32, reason: f16.reason ?? 'no tensor cores' };
  return { path: 'tensor-cores', detail: `A as three f16 planes (two at high) times the weight's exact f16 image, ${f16.detail}` };
}

/** Quantized weights: the fused tensor-core kernel for the rows `quantLinear` gives it, else the GEMV (and the
 *  fused f32 kernels for more rows). */
function quantizedOf(ctx: Context): ComputePath {
  const { minRows, maxRows } = qtcTuning;
  if (quantRowsOnTensorCores(ctx, minRows)) {
    const p = qtcPlan(ctx) as Exclude<ReturnType<typeof qtcPlan>, { reason: string }>;
    const f = p.frag;
    return {
      path: 'tensor-cores',
      detail: `${minRows}-${maxRows} rows: W's tiles dequantized to f16 in workgroup memory, subgroup matrices ${f.M}x${f.N}x${f.K} ${f.componentType} -> ${f.resultComponentType}; fewer rows: the subgroup GEMV; more: W dequantized, then the matmul`,
    };
  }
  const plan = qtcPlan(ctx);
  return {
    path: 'portable',
    detail: `1-${QUANT_GEMV_MAX_ROWS} rows: the decode GEMV; more: W dequantized in the kernel, f32 arithmetic`,
    reason: 'reason' in plan ? plan.reason : 'a software adapter',
  };
}

/** Which matmul and attention kernels this adapter runs (what `rusty devices` shows). */
export function computePaths(ctx: Context): ComputePaths {
  const f16 = matmulOf(ctx, 'f16');
  return {
    matmul: { f16, bf16: matmulOf(ctx, 'bf16'), f32: matmulOf(ctx, 'f32') },
    f32High: f32HighOf(f16),
    f32Frozen: f32FrozenOf(f16),
    attention: Object.fromEntries(HEAD_DIMS.map((D) => [`D=${D}`, attentionOf(ctx, D)])),
    quantized: quantizedOf(ctx),
  };
}

/** The lines of `rusty devices` for {@link computePaths}. */
export function computePathLines(p: ComputePaths): string[] {
  const line = (what: string, c: ComputePath) =>
    `  ${what.padEnd(22)} ${c.path === 'tensor-cores' ? 'tensor cores' : 'portable'}: ${c.detail}${c.reason ? ` (${c.reason})` : ''}`;
  return [
    'compute paths',
    ...(['f16', 'bf16', 'f32'] as const).map((d) => line(`matmul ${d} x ${d}`, p.matmul[d])),
    line('matmul f32, high', p.f32High),
    line('matmul f32 x frozen', p.f32Frozen),
    ...Object.entries(p.attention).map(([k, c]) => line(`attention f16 ${k}`, c)),
    line('quantized weights', p.quantized),
  ];
}
