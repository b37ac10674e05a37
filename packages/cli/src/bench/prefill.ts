// Prefill of a loaded model with quantized weights: one forward over P prompt tokens (no gradient, no cache), wall
// time to the end of its GPU work, with quantLinear's fused tensor-core kernel for 5-256 rows (`tc`, the default)
// against the kernels it replaced (`old`: the subgroup GEMV, q/k/v and gate/up fused, for at most 16 rows, the
// dequant path above; `qtcTuning.minRows` set past every length), alternating, in one process; and how far the
// two last-position logits are apart (the order of the two alternates between repetitions) (max-abs over max-abs: f16 rounding of X and W on the tensor-core path).
// Prints one JSON line. On the GPU machine, with the models of decode-7b.sh / qlora-make-model.py:
//   bash .gpu/run.sh prefill <model dir> [--quantize=int4|nf4|int8] [--lengths=8,16,64,256] [--reps=5]
import { copyRows, createContext, download, empty, kernelsReady, qtcTuning, type QuantFormat } from '@rusty/backend';
import { noGrad, Tensor } from '@rusty/autograd';
import type { CausalLM } from '@rusty/graph';
import { loadPretrained } from '@rusty/loader';

const args = process.argv.slice(2);
const opt = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
const dir = args.find((a) => !a.startsWith('--'));
if (!dir) throw new Error('usage: prefill <model dir> [--quantize=F] [--lengths=a,b,...] [--reps=N]');
const lengths = (opt('lengths') ?? '8,16,64,256').split(',').map(Number);
const reps = Number(opt('reps') ?? 5);
const quantize = (opt('quantize') ?? 'int4') as QuantFormat;

const ctx = await createContext();
const t0 = performance.now();
const { model } = await loadPretrained(ctx, dir, { dtype: 'f32', requiresGrad: false, quantize });
const loadS = (performance.now() - t0) / 1e3;
const lm = model as unknown as CausalLM;
lm.eval();
const v = lm.config.vocabSize;
const minRows = qtcTuning.minRows;

/** One prefill of P tokens under `mode`: wall ms and the last position's logits. */
async function once(P: number, mode: 'tc' | 'old'): Promise<{ ms: number; last: Float32Array }> {
  qtcTuning.minRows = mode === 'tc' ? minRows : Infinity;
  const ids = Array.from({ length: P }, (_, i) => (100 + 37 * i) % v);
  await ctx.sync();
  const t = performance.now();
  const last = noGrad(() => {
    const input = Tensor.fromArray(ctx, ids, [1, P], { dtype: 'i32' });
    const logits = lm.forward(input);
    const l = empty(ctx, [1, 1, v]);
    copyRows(ctx, logits.data, l, 1, P - 1, 0);
    input.dispose();
    logits.dispose();
    return l;
  });
  const row = await download(ctx, last);
  const ms = performance.now() - t;
  ctx.release(last.buffer);
  qtcTuning.minRows = minRows;
  return { ms, last: Float32Array.from(row) };
}

const rows: Record<string, unknown>[] = [];
for (const P of lengths) {
  // warm-up: every kernel of both modes built (the tensor-core kernels are checked asynchronously)
  await once(P, 'tc');
  await kernelsReady(ctx);
  await once(P, 'tc');
  await once(P, 'old');
  const ms: Record<'tc' | 'old', number[]> = { tc: [], old: [] };
  let a: Float32Array = new Float32Array(0);
  let b: Float32Array = new Float32Array(0);
  for (let r = 0; r < reps; r++)
    for (const mode of r % 2 ? (['old', 'tc'] as const) : (['tc', 'old'] as const)) {
      const o = await once(P, mode);
      ms[mode].push(o.ms);
      if (mode === 'tc') a = o.last;
      else b = o.last;
    }
  let num = 0;
  let den = 0;
  for (let i = 0; i < v; i++) {
    num = Math.max(num, Math.abs(a[i]! - b[i]!));
    den = Math.max(den, Math.abs(b[i]!));
  }
  const med = (x: number[]) => [...x].sort((p, q) => p - q)[Math.floor(x.length / 2)]!;
  const row = { P, tcMs: +med(ms.tc).toFixed(2), oldMs: +med(ms.old).toFixed(2), speedup: +(med(ms.old) / med(ms.tc)).toFixed(2), logitsRelDiff: num / den, argmaxSame: argmax(a) === argmax(b) };
  rows.push(row);
  process.stderr.write(`prefill ${JSON.stringify(row)}\n`);
}
process.stdout.write(JSON.stringify({ date: new Date().toISOString(), adapter: ctx.info.description, model: dir, quantize, loadS: +loadS.toFixed(1), reps, rows }) + '\n');
ctx.destroy();

function argmax(x: Float32Array): number {
  let j = 0;
  for (let i = 1; i < x.length; i++) if (x[i]! > x[j]!) j = i;
  return j;
}
