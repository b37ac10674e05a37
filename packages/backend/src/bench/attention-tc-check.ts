/**
 * GPU-machine correctness check of the tensor-core attention kernels (no vitest there): the cases of
 * `ops/attention/flash-tc.cases.ts` (the same ones `flash-tc.test.ts` runs where the adapter has subgroup
 * matrices), forward and backward against float64 of the f16-rounded inputs. Prints one JSON line per case and a
 * summary line; exits 1 if any error is at or above the tolerance or the adapter has no tensor-core path.
 *
 *   node attention-tc-check.js
 */
import { createContext } from '../context';
import { attentionTcPlan, attentionTcPath } from '../ops/attention/flash-tc';
import { runTcAttnCase, TC_ATTN_TOL, tcAttnCases } from '../ops/attention/flash-tc.cases';

const ctx = await createContext();
const plan = attentionTcPlan(ctx.info);
const device = `${ctx.info.vendor} ${ctx.info.architecture} ${ctx.info.description}`.trim();
if (!('frag' in plan)) {
  console.log(JSON.stringify({ check: 'attention-tc', device, ok: false, reason: plan.reason }));
  process.exit(1);
}
const p64 = attentionTcPath(ctx, 64);
const p128 = attentionTcPath(ctx, 128);
console.log(JSON.stringify({ check: 'attention-tc', device, frag: plan.frag, subgroupSize: plan.subgroupSize, tilesD64: 'tiles' in p64 ? p64.tiles : p64, tilesD128: 'tiles' in p128 ? p128.tiles : p128 }));
let bad = 0;
let worst = 0;
let n = 0;
for (const c of tcAttnCases()) {
  try {
    const r = await runTcAttnCase(ctx, c);
    const m = Math.max(...Object.values(r.err));
    worst = Math.max(worst, m);
    const ok = m < TC_ATTN_TOL;
    if (!ok) bad++;
    n++;
    console.log(JSON.stringify({ case: r.name, ok, err: Object.fromEntries(Object.entries(r.err).map(([k, e]) => [k, +e.toExponential(2)])) }));
  } catch (e) {
    bad++;
    console.log(JSON.stringify({ case: JSON.stringify(c), ok: false, error: (e as Error).message.slice(0, 3000) }));
  }
}
console.log(JSON.stringify({ summary: 'attention-tc', cases: tcAttnCases().length, ran: n, failed: bad, worstRelErr: +worst.toExponential(2), tol: TC_ATTN_TOL }));
ctx.destroy();
process.exit(bad ? 1 : 0);
