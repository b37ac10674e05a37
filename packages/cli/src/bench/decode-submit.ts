// The decoding loop of `rusty generate` at several submit caps (`GenerateOptions.submitEvery`) on one loaded model:
// tokens/s after the first token for each cap, in alternating rounds, and whether every cap generated the same
// tokens. Prints one JSON line. On the GPU machine, with the 7B-shaped model of decode-7b.sh:
//   bash .gpu/run.sh decode-submit <model dir> [--tokens=128] [--quantize=int4|nf4|int8] [--dtype=bf16]
//                                  [--every=16,32,64,128,1000000] [--rounds=2]
import { createContext, type DType, type QuantFormat } from '@rusty/backend';
import { generateStream, type CausalLM } from '@rusty/graph';
import { loadPretrained } from '@rusty/loader';

const args = process.argv.slice(2);
const opt = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
const dir = args.find((a) => !a.startsWith('--'));
if (!dir) throw new Error('usage: decode-submit <model dir> [--tokens=N] [--quantize=F] [--dtype=D] [--every=a,b,...] [--rounds=N]');
const tokens = Number(opt('tokens') ?? 128);
const caps = (opt('every') ?? '16,32,64,128,1000000').split(',').map(Number);
const rounds = Number(opt('rounds') ?? 2);

const ctx = await createContext();
const quantize = opt('quantize') as QuantFormat | undefined;
const { model } = await loadPretrained(ctx, dir, { dtype: (opt('dtype') as DType | undefined) ?? 'f32', requiresGrad: false, ...(quantize ? { quantize } : {}) });
const lm = model as unknown as CausalLM;
const prompt = Array.from({ length: 24 }, (_, i) => (100 + 37 * i) % lm.config.vocabSize);

/** Tokens/s after the first token, and the ids. */
async function run(every: number): Promise<{ rate: number; ids: number[] }> {
  const ids: number[] = [];
  let t1 = 0;
  for await (const id of generateStream(lm, prompt, { maxNewTokens: tokens, temperature: 0, stopTokens: [], submitEvery: every })) {
    ids.push(id);
    if (ids.length === 1) t1 = performance.now();
  }
  return { rate: (ids.length - 1) / ((performance.now() - t1) / 1e3), ids };
}

await run(64); // warm-up: kernels built, pool filled
const rates: Record<string, number[]> = {};
let first: number[] | null = null;
let same = true;
for (let r = 0; r < rounds; r++)
  for (const every of caps) {
    const { rate, ids } = await run(every);
    (rates[every] ??= []).push(+rate.toFixed(1));
    if (!first) first = ids;
    else if (ids.join() !== first.join()) same = false;
  }
console.log(JSON.stringify({ dir, quantize: quantize ?? null, dtype: opt('dtype') ?? 'f32', tokens, rates, sameTokens: same }));
ctx.destroy();
