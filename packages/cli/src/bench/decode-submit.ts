// The decoding loop of `rusty generate` at several submit caps (`GenerateOptions.submitEvery`) on one loaded model:
// tokens/s after the first token for each cap, in alternating rounds, and whether every cap generated the same
// tokens; with `--fuse=on,off`, also with q/k/v and gate/up run one projection at a time (`fusionSettings`), and the
// dispatches per token of each; with `--profile`, one more run of each with per-kernel GPU times (timestamp
// queries, one pass per dispatch): GPU microseconds per token by kernel, against the run's wall time per token.
// With `--cold`, the first 12 token intervals (ms) of the warm-up run, the process's first (interval 0: prompt to
// first token), are printed as `coldIntervalsMs`: the kernels built during the first decoding steps show there
// (the CLI's one run of `rusty generate` pays them). With `--lookahead=0,2`, each cap also runs at each greedy
// lookahead (`GenerateOptions.lookahead`; 0: every token picked on the host after a read-back of its logits);
// with `--residual=on,off`, with and without the residual add and the activation in the down projection's GEMV
// and q and k rotated in one dispatch; with `--limbs=on,off`, with and without the norms writing int8 limbs for
// int4 q/k/v and gate/up (`fusionSettings.limbs`: the integer int4 GEMV; `sameTokensLimbs` compares the tokens);
// with `--kv=on,off`, with and without ropePair storing the keys and values in the cache (`fusionSettings.kv`).
// Prints one JSON line. On the GPU machine, with the 7B-shaped model of decode-7b.sh:
//   bash .gpu/run.sh decode-submit <model dir> [--tokens=128] [--quantize=int4|nf4|int8] [--dtype=bf16]
//                                  [--every=16,32,64,128,1000000] [--rounds=2] [--fuse=on,off] [--lookahead=0,2] [--residual=on,off] [--limbs=on,off] [--kv=on,off]
//                                  [--profile] [--cold]
import { createContext, type DType, type QuantFormat } from '@rusty/backend';
import { fusionSettings, generateStream, type CausalLM } from '@rusty/graph';
import { loadPretrained } from '@rusty/loader';

const args = process.argv.slice(2);
const opt = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
const dir = args.find((a) => !a.startsWith('--'));
if (!dir) throw new Error('usage: decode-submit <model dir> [--tokens=N] [--quantize=F] [--dtype=D] [--every=a,b,...] [--rounds=N]');
const tokens = Number(opt('tokens') ?? 128);
const caps = (opt('every') ?? '16,32,64,128,1000000').split(',').map(Number);
const rounds = Number(opt('rounds') ?? 2);
const fuses = (opt('fuse') ?? 'on').split(',').map((f) => f === 'on');
// the thirteenth session's decode fusions (`fusionSettings.residual`: the residual add in the down projection's
// GEMV; `.rope`: queries and keys rotated in one dispatch; `.gated`: the MLP's activation in the down GEMV), with
// the fused projections
const residuals = (opt('residual') ?? 'on').split(',').map((f) => f === 'on');
// greedy decoding's lookahead (`GenerateOptions.lookahead`; 0: each token picked on the host); unset: the default
const lookaheads: (number | undefined)[] = opt('lookahead')?.split(',').map(Number) ?? [undefined];
// the norms writing int8 limbs for the integer int4 GEMV (`fusionSettings.limbs`)
const limbsOpts = (opt('limbs') ?? 'on').split(',').map((f) => f === 'on');
// ropePair storing the keys and values in the KV cache (`fusionSettings.kv`)
const kvOpts = (opt('kv') ?? 'on').split(',').map((f) => f === 'on');

const profile = args.includes('--profile');
const ctx = await createContext({ profile });
const quantize = opt('quantize') as QuantFormat | undefined;
const { model } = await loadPretrained(ctx, dir, { dtype: (opt('dtype') as DType | undefined) ?? 'f32', requiresGrad: false, ...(quantize ? { quantize } : {}) });
const lm = model as unknown as CausalLM;
const prompt = Array.from({ length: 24 }, (_, i) => (100 + 37 * i) % lm.config.vocabSize);

/** Tokens/s after the first token, the ids, dispatches per token after the first, and the first intervals (ms). */
async function run(every: number, lookahead?: number): Promise<{ rate: number; ids: number[]; perToken: number; intervals: number[] }> {
  const ids: number[] = [];
  let t1 = 0;
  let d1 = 0;
  let last = performance.now();
  const intervals: number[] = [];
  for await (const id of generateStream(lm, prompt, { maxNewTokens: tokens, temperature: 0, stopTokens: [], submitEvery: every, ...(lookahead !== undefined ? { lookahead } : {}) })) {
    ids.push(id);
    const now = performance.now();
    if (intervals.length < 12) intervals.push(+(now - last).toFixed(1));
    last = now;
    if (ids.length === 1) {
      t1 = performance.now();
      d1 = ctx.stats.dispatches;
    }
  }
  return { rate: (ids.length - 1) / ((performance.now() - t1) / 1e3), ids, perToken: (ctx.stats.dispatches - d1) / (ids.length - 1), intervals };
}

let coldIntervalsMs: number[] | undefined;
for (const fuse of fuses) {
  fusionSettings.projections = fuse;
  const r = await run(64); // warm-up: kernels built, pool filled
  coldIntervalsMs ??= r.intervals;
}
const rates: Record<string, number[]> = {};
const dispatchesPerToken: Record<string, number> = {};
const first = new Map<boolean, string>();
const byLimbs = new Map<boolean, string>();
let same = true;
for (let r = 0; r < rounds; r++)
  for (const fuse of fuses)
    for (const every of caps)
      for (const la of lookaheads)
        for (const res of residuals)
          for (const [limbs, kv] of limbsOpts.flatMap((l) => kvOpts.map((k) => [l, k] as const))) {
            fusionSettings.projections = fuse;
            fusionSettings.residual = fusionSettings.rope = fusionSettings.gated = res;
            fusionSettings.limbs = limbs;
            fusionSettings.kv = kv;
            const { rate, ids, perToken } = await run(every, la);
            const tag = `${res ? '' : ' new fusions off'}${limbs ? '' : ' limbs off'}${kv ? '' : ' kv off'}`;
            const key = `${every}${fuse ? '' : ' unfused'}${la !== undefined ? ` lookahead ${la}` : ''}${tag}`;
            (rates[key] ??= []).push(+rate.toFixed(1));
            dispatchesPerToken[`${fuse ? 'fused' : 'unfused'}${tag}`] = perToken;
            // limbs round x to 24 bits per group of 16: their tokens are compared apart
            if (fuse && res) {
              if (!byLimbs.has(limbs)) byLimbs.set(limbs, ids.join());
            }
            if (limbs === limbsOpts[0]) {
              if (!first.has(fuse)) first.set(fuse, ids.join());
              else if (ids.join() !== first.get(fuse)) same = false;
            }
          }
fusionSettings.residual = fusionSettings.rope = fusionSettings.gated = fusionSettings.limbs = fusionSettings.kv = true;
const sameFusedUnfused = first.size === 2 ? first.get(true) === first.get(false) : null;
const sameTokensLimbs = byLimbs.size === 2 ? byLimbs.get(true) === byLimbs.get(false) : null;
const gpu: Record<string, unknown> = {};
if (profile)
  for (const [fuse, limbs] of fuses.flatMap((f) => limbsOpts.map((l) => [f, l] as const))) {
    fusionSettings.projections = fuse;
    fusionSettings.limbs = limbs;
    await ctx.sync();
    ctx.profiler.reset();
    const t0 = performance.now();
    const { ids } = await run(64);
    const wallUs = ((performance.now() - t0) * 1e3) / ids.length;
    await ctx.sync();
    const kernels = (await ctx.profiler.summary()).map((k) => ({ name: k.name, count: +(k.count / ids.length).toFixed(1), us: +((k.totalMs * 1e3) / ids.length).toFixed(1) }));
    const sumUs = +kernels.reduce((a, k) => a + k.us, 0).toFixed(1);
    gpu[`${fuse ? 'fused' : 'unfused'}${limbs ? '' : ' limbs off'}`] = { wallUsPerToken: +wallUs.toFixed(1), gpuUsPerToken: sumUs, kernels: kernels.slice(0, 14) };
  }
console.log(JSON.stringify({ dir, quantize: quantize ?? null, dtype: opt('dtype') ?? 'f32', tokens, rates, dispatchesPerToken, sameTokens: same, sameFusedUnfused, sameTokensLimbs, ...(profile ? { gpu } : {}), ...(args.includes('--cold') ? { coldIntervalsMs } : {}) }));
ctx.destroy();
