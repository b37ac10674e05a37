import accumulateWgsl from '../../../../shaders/accumulate.wgsl';
import scaleWgsl from '../../../../shaders/scale.wgsl';
import type { Context } from '../context';
import { cachedKernel } from '../kernel-cache';
import { ShapeError } from '../errors';
import { grid1d } from '../grid';
import { numel, type DeviceTensor } from '../tensor';

/** In place: `y = beta * y + alpha * x` (y f32; x any float dtype, same number of elements). */
export function accumulate(ctx: Context, y: DeviceTensor, x: DeviceTensor, alpha = 1, beta = 1): void {
  const n = numel(y.shape);
  if (y.dtype !== 'f32') throw new ShapeError(`accumulate: target must be f32, got ${y.dtype}`);
  if (numel(x.shape) !== n)
    throw new ShapeError(`accumulate: [${x.shape.join(', ')}] into [${y.shape.join(', ')}] (element counts differ)`);
  if (x.buffer === y.buffer) {
    scaleInPlace(ctx, y, beta + alpha);
    return;
  }
  const k = cachedKernel(ctx, `accumulate:${x.dtype}`, () => ({
    name: 'accumulate',
    code: accumulateWgsl,
    bindings: [
      { name: 'x', access: 'read', dtype: x.dtype },
      { name: 'y', access: 'rw', dtype: 'f32' },
    ],
    params: ['u32:n', 'u32:row', 'f32:alpha', 'f32:beta'],
  }));
  const { wg, row } = grid1d(n, 256);
  ctx.dispatch(k, [x.buffer, y.buffer], wg, [n, row, alpha, beta]);
}


/** In place: `y *= alpha` (f32). */
export function scaleInPlace(ctx: Context, y: DeviceTensor, alpha: number): void {
  const n = numel(y.shape);
  const k = cachedKernel(ctx, 'scale_in_place', () => ({
    name: 'scale_in_place',
    code: scaleWgsl,
    bindings: [{ name: 'y', access: 'rw', dtype: 'f32' }],
    params: ['u32:n', 'u32:row', 'f32:alpha'],
  }));
  const { wg, row } = grid1d(n, 256);
  ctx.dispatch(k, [y.buffer], wg, [n, row, alpha]);
}
