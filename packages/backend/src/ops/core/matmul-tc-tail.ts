/**
 * The split tail of a tensor-core product (see `tcTail` in matmul-tc.ts): its encoding, the TAIL kernel over a
 * linear grid and the kernel that sums the chunks into C (`shaders/matmul-tc-tail.wgsl`).
 */
import tailWgsl from '../../../../../shaders/matmul-tc-tail.wgsl';
import type { BufferBinding, Context, Kernel } from '../../context';
import { grid1d, grid2d } from '../../grid';
import { cachedKernel } from '../../kernel-cache';
import type { TcLaunch, TcTail, TcTile } from './matmul-tc';

/** A product with a split tail: the kernel (TAIL) over a linear grid, its chunks into a scratch buffer, then
 *  `shaders/matmul-tc-tail.wgsl` summing them into C with alpha. */
export function encodeTail(ctx: Context, k: Kernel, t: TcTile, l: TcLaunch, tail: TcTail, bufs: BufferBinding[], params: number[]): void {
  const part = ctx.alloc(tail.tiles * tail.chunks * t.bm * t.bn * 4);
  try {
    const [x, y] = grid2d(tail.full + tail.tiles * tail.chunks);
    ctx.dispatch(k, [...bufs, part], [x, y, 1], [...params, tail.full, tail.tiles, tail.chunks, tail.slices]);
    tcTailSum(ctx, part, bufs[3]!, t, l, tail);
  } finally {
    ctx.release(part);
  }
}

/** The second kernel of a split tail (`shaders/matmul-tc-tail.wgsl`): C = alpha x the sum in chunk order of each
 *  tail tile's partial products in `part` ([tiles, chunks, BM, BN] f32), within C's bounds; nothing else of C. */
export function tcTailSum(ctx: Context, part: BufferBinding, c: BufferBinding, t: Pick<TcTile, 'bm' | 'bn'>, l: Pick<TcLaunch, 'M' | 'N' | 'alpha'>, tail: TcTail): void {
  const k = cachedKernel(ctx, `mmtc-tail:${t.bm}x${t.bn}`, () => ({
    name: 'matmul-tc-tail',
    code: tailWgsl,
    bindings: [
      { name: 'part', access: 'read', dtype: 'f32' },
      { name: 'c', access: 'rw', dtype: 'f32' },
    ],
    params: ['u32:n', 'u32:row', 'u32:M', 'u32:N', 'u32:full', 'u32:chunks', 'f32:alpha'],
    consts: { BM: t.bm, BN: t.bn },
  }));
  const n = tail.tiles * t.bm * t.bn;
  const { wg, row } = grid1d(n, 256);
  ctx.dispatch(k, [part, c], wg, [n, row, l.M, l.N, tail.full, tail.chunks, l.alpha]);
}
