// The custom-op example of the package README, run as a test (keep the two in sync).
import { createContext, empty, grid1d, numel, type Context, type DeviceTensor, type KernelDef } from '@rusty/backend';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineOp, gradcheck, Tensor } from './index';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

// --- README example begins ---
// y = x^3 elementwise: forward and backward are WGSL kernels, declared in one place.
const cubeForward: KernelDef = {
  name: 'cube_forward',
  bindings: [
    { name: 'x', access: 'read', dtype: 'f32' },
    { name: 'y', access: 'rw', dtype: 'f32' },
  ],
  params: ['u32:n', 'u32:row'],
  code: /* wgsl */ `
    @compute @workgroup_size(256)
    fn main(@builtin(global_invocation_id) g: vec3u) {
      let i = g.x + g.y * p.row;
      if (i < p.n) { let v = read_x(i); y[i] = v * v * v; }
    }`,
};
const cubeBackward = (factor: number): KernelDef => ({
  name: `cube_backward_${factor}`,
  bindings: [
    { name: 'x', access: 'read', dtype: 'f32' },
    { name: 'dy', access: 'read', dtype: 'f32' },
    { name: 'dx', access: 'rw', dtype: 'f32' },
  ],
  params: ['u32:n', 'u32:row'],
  code: /* wgsl */ `
    @compute @workgroup_size(256)
    fn main(@builtin(global_invocation_id) g: vec3u) {
      let i = g.x + g.y * p.row;
      if (i < p.n) { let v = read_x(i); dx[i] = ${factor.toFixed(1)} * v * v * read_dy(i); }
    }`,
});

function makeCube(name: string, backwardFactor: number) {
  return defineOp({
    name,
    forward(ctx, [x]) {
      const y = empty(ctx, x!.shape);
      const { wg, row } = grid1d(numel(x!.shape), 256);
      ctx.dispatch(ctx.kernel(cubeForward), [x!.buffer, y.buffer], wg, [numel(x!.shape), row]);
      return { outputs: y, saved: [x!] }; // backward needs x
    },
    backward(ctx, [dy], [x]) {
      const dx: DeviceTensor = empty(ctx, x!.shape);
      const { wg, row } = grid1d(numel(x!.shape), 256);
      ctx.dispatch(ctx.kernel(cubeBackward(backwardFactor)), [x!.buffer, dy!.buffer, dx.buffer], wg, [numel(x!.shape), row]);
      return [dx];
    },
  });
}
const cube = makeCube('cube', 3);
// --- README example ends ---

describe('custom ops', () => {
  it('forward and backward of a user WGSL op', async () => {
    const x = Tensor.fromArray(ctx, [1, -2, 0.5, 3], [2, 2], { requiresGrad: true });
    const y = cube([x]);
    expect(Array.from(await y.toArray())).toEqual([1, -8, 0.125, 27]);
    y.backward(Tensor.ones(ctx, [2, 2]));
    expect(Array.from(await x.grad!.toArray())).toEqual([3, 12, 0.75, 27]);
  });

  it('gradcheck passes on the correct op and fails on a deliberately wrong backward', async () => {
    const x = Tensor.randn(ctx, [3, 5], { seed: 3, requiresGrad: true });
    const good = await gradcheck((t) => cube([t]), [x]);
    expect(good.ok).toBe(true);
    const wrongCube = makeCube('cube_wrong', 2.5);
    const bad = await gradcheck((t) => wrongCube([t]), [x]);
    expect(bad.ok).toBe(false);
    expect(bad.inputs[0]!.maxError).toBeGreaterThan(bad.inputs[0]!.tolerance);
  });

  it('backward twice over a freed graph is a clear error', async () => {
    const x = Tensor.fromArray(ctx, [2], [1], { requiresGrad: true });
    const y = cube([x]);
    y.backward();
    expect(() => y.backward()).toThrow(/already freed/);
  });
});
