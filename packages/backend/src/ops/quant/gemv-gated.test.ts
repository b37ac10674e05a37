// gemvGated: a gated MLP's activation inside the down projection's GEMV, against the activation kernel and the
// GEMV run apart (bit for bit: the same act() and the same sums), for quantized and float weights, 1 and 3 rows,
// rows of 16-byte and of scalar loads, both activations, with a bias; and where it does not apply, null.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from '../../context';
import { download, release, upload, type DeviceTensor } from '../../tensor';
import { randn } from '../../testing';
import { geluTanhGate, swiglu } from '../llm/gated';
import { quantSpec } from './formats';
import { gemv16, gemvGated, gemvSubgroupsAvailable } from './gemv';
import { quantLinear } from './qmatmul';
import { quantize, releaseQuant } from './quantize';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

describe('gemvGated', () => {
  it.runIf(() => gemvSubgroupsAvailable(ctx))('equals the activation kernel and the GEMV apart, bit for bit', async () => {
    let seed = 40;
    for (const [kind, M, N, K, act, withBias] of [
      ['int4', 1, 37, 256, 'silu', false],
      ['int4', 3, 20, 192, 'gelu_tanh', true],
      ['nf4', 1, 24, 128, 'silu', true],
      ['int8', 1, 9, 96, 'silu', false],
      ['bf16', 1, 33, 160, 'silu', true],
      ['f32', 2, 17, 102, 'gelu_tanh', false],
    ] as const) {
      const label = `${kind}, ${M} x ${K} -> ${N}, ${act}${withBias ? ', bias' : ''}`;
      const gate = upload(ctx, randn(M * K, seed++, 2), [M, K]);
      const up = upload(ctx, randn(M * K, seed++), [M, K]);
      const bias = withBias ? upload(ctx, randn(N, seed++, 3), [N]) : undefined;
      const wf = upload(ctx, randn(N * K, seed++, 0.1), [N, K], kind === 'bf16' ? 'bf16' : 'f32');
      const q = kind === 'bf16' || kind === 'f32' ? null : quantize(ctx, wf, kind === 'int4' ? quantSpec('int4', 32) : kind === 'nf4' ? quantSpec('nf4', 64) : quantSpec('int8'));
      const a = act === 'silu' ? swiglu(ctx, gate, up) : geluTanhGate(ctx, gate, up);
      const apart = q ? quantLinear(ctx, a, q, { bias, variant: 'gemv' }) : gemv16(ctx, a, wf, { bias });
      const fused = gemvGated(ctx, gate, up, act, q ?? wf, { bias });
      expect(fused, label).not.toBeNull();
      expect(fused!.shape, label).toEqual([M, N]);
      expect(Array.from(await download(ctx, fused!)), label).toEqual(Array.from(await download(ctx, apart)));
      release(ctx, gate, up, wf, a, apart, fused!, ...(bias ? [bias] : []));
      if (q) releaseQuant(ctx, q);
    }
  });

  it.runIf(() => gemvSubgroupsAvailable(ctx))('null where it does not apply', () => {
    const g = upload(ctx, randn(64, 1), [1, 64]);
    const w = upload(ctx, randn(8 * 64, 2), [8, 64]);
    const none = (gate: DeviceTensor, up: DeviceTensor, wt: DeviceTensor) => gemvGated(ctx, gate, up, 'silu', wt);
    const g16 = upload(ctx, randn(64, 1), [1, 64], 'f16');
    const rows17 = upload(ctx, randn(17 * 64, 3), [17, 64]);
    const w63 = upload(ctx, randn(8 * 63, 2), [8, 63]);
    const g63 = upload(ctx, randn(63, 1), [1, 63]);
    expect(none(g16, g16, w)).toBeNull(); // 16-bit inputs
    expect(none(rows17, rows17, w)).toBeNull(); // more rows than the GEMV takes
    expect(none(g63, g63, w63)).toBeNull(); // odd K of a float weight
    expect(none(g, upload(ctx, randn(32, 1), [1, 32]), w)).toBeNull(); // up of another shape
    release(ctx, g, w, g16, rows17, w63, g63);
  });
});
