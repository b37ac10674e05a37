// Specialisation constants (KernelDef.consts): the `const` prelude, kernels specialised by them (a private
// array sized by one), and their place in the kernel's identity.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from './context';
import { ShapeError } from './errors';
import { constPrelude, kernelBaseKey, kernelSource, type KernelDef } from './kernel';
import { download, empty, poison } from './tensor';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

/** y[i] = sum of the first N of (1, 2, 3, ...) scaled by S, with a private array of N elements. */
const tri = (N: number, S: number, NEG: boolean): KernelDef => ({
  name: 'test_consts',
  code: `@compute @workgroup_size(1) fn main() {
  var a: array<f32, N>;
  for (var i = 0u; i < N; i++) { a[i] = f32(i + 1u); }
  var s = 0.0;
  for (var i = 0u; i < N; i++) { s += a[i]; }
  y[0] = select(s * S, -s * S, NEG);
}`,
  bindings: [{ name: 'y', access: 'rw', dtype: 'f32' }],
  consts: { N, S, NEG },
});

describe('KernelDef.consts', () => {
  it('declares each constant with its WGSL type', () => {
    expect(constPrelude({ A: 3, B: true, C: -2, D: 0.5 })).toBe(
      'const A: u32 = 3u;\nconst B: bool = true;\nconst C: i32 = -2i;\nconst D: f32 = 0.500000000;\n',
    );
    expect(() => constPrelude({ X: NaN })).toThrow(ShapeError);
    expect(kernelSource(tri(4, 1.5, false))).toContain('const N: u32 = 4u;');
  });

  it('specialises a kernel: each set of constants its own pipeline', async () => {
    const y = empty(ctx, [1]);
    for (const [N, S, NEG, want] of [
      [4, 1.5, false, 15],
      [7, 0.5, true, -14],
    ] as const) {
      poison(ctx, y);
      ctx.dispatch(ctx.kernel(tri(N, S, NEG)), [y.buffer], 1);
      expect(Array.from(await download(ctx, y))).toEqual([want]);
    }
    expect(kernelBaseKey(tri(4, 1.5, false))).not.toBe(kernelBaseKey(tri(7, 1.5, false)));
    expect(ctx.kernel(tri(4, 1.5, false))).toBe(ctx.kernel(tri(4, 1.5, false)));
    ctx.release(y.buffer);
  });
});
