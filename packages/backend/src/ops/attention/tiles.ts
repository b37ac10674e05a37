import type { Context } from '../../context';
import { ConfigError } from '../../errors';
import { rowLayout } from './common';

/** `[a, b]` or `[a, b, c]`: see {@link AttentionTiles}. */
export type AttentionTile = readonly [number, number] | readonly [number, number, number];

/**
 * Tile sizes of the flash-attention kernels. Each thread owns 4 rows of a score block times `c` columns
 * (default 4); `a` and `b` are multiples of 4 and of `c` respectively.
 * - `fwd: [BR, BC, c]`: query rows per workgroup, keys per tile, keys per thread;
 * - `dkdv: [BC, BR, c]`: keys per workgroup, query rows per step, queries per thread;
 * - `dq: [BR, BC, c]`: query rows per workgroup, keys per step, keys per thread.
 */
export interface AttentionTiles {
  fwd: AttentionTile;
  dkdv: AttentionTile;
  dq: AttentionTile;
}

const V4 = 16;

/** Threads per row group, output chunks per thread and threads of a `[rows4, cols, c]` tile at head dim D. */
export function tileShape(D: number, rows: number, cols: number, c = 4): { TC: number; DC: number; NT: number } {
  const DV = Math.ceil(D / 4);
  const TC = cols / c;
  return { TC, DC: Math.ceil(DV / TC), NT: (rows / 4) * TC };
}

/** Workgroup bytes of the forward kernel (see attention-fwd.wgsl). */
export function fwdBytes(D: number, br: number, bc: number, cn = 4): number {
  const { DS } = rowLayout(D);
  const { TC, DC } = tileShape(D, br, bc, cn);
  const PS = br / 4 + 1;
  return V4 * (br * DS + bc * DS + TC * DC + bc * PS + TC * PS) + 4 * bc;
}

/** Workgroup bytes of the dK/dV kernel (see attention-bwd-dkdv.wgsl). */
export function dkdvBytes(D: number, bc: number, br: number, cq = 4): number {
  const { DS } = rowLayout(D);
  const { TC: TQ, DC } = tileShape(D, bc, br, cq);
  const PS = bc / 4 + 1;
  return V4 * (2 * bc * DS + 2 * (br * DS + TQ * DC) + 2 * br * PS) + 8 * br + 4 * bc;
}

/** Workgroup bytes of the dQ kernel (see attention-bwd-dq.wgsl). */
export function dqBytes(D: number, br: number, bc: number, ck = 4): number {
  const { DS } = rowLayout(D);
  const { TC, DC } = tileShape(D, br, bc, ck);
  const PS = br / 4 + 1;
  return V4 * (2 * br * DS + 2 * bc * DS + TC * DC + bc * PS) + 4 * bc;
}

// Candidates in preference order (the first that fits the device and keeps the per-thread accumulators
// small wins; see pick). Two columns per thread measured best on an H200 at D = 64 (128-256 threads per
// workgroup): fwd [64, 32, 2] 0.73 ms, dkdv [32, 32, 2] 1.55 ms, dq [64, 16, 2] 1.20 ms at B=8, H=12, T=1024.
const FWD: [number, number, number][] = [
  [64, 32, 2], [64, 32, 4], [32, 32, 2], [32, 32, 4], [64, 16, 2], [32, 16, 2], [16, 16, 2], [16, 16, 1],
  [16, 8, 1], [8, 8, 1], [8, 4, 1], [4, 4, 1],
];
const DKDV: [number, number, number][] = [
  [32, 32, 2], [32, 32, 4], [32, 16, 2], [16, 16, 2], [16, 16, 1], [16, 8, 1], [8, 8, 1], [8, 4, 1], [4, 4, 1],
];
const DQ: [number, number, number][] = [
  [64, 16, 2], [32, 32, 2], [64, 16, 4], [32, 32, 4], [32, 16, 2], [16, 16, 2], [16, 16, 1], [16, 8, 1], [8, 8, 1],
  [4, 4, 1],
];

// Software adapters (lavapipe): speed there is moot, but LLVM's compile time is not; these compile several
// times faster on lavapipe than the lists above (measured at D = 16 and 64).
const FWD_SW: [number, number, number][] = [[32, 32, 2], [32, 16, 2], [16, 16, 2], [16, 8, 2], [16, 8, 1], [8, 8, 1], [4, 4, 1]];
const DKDV_SW: [number, number, number][] = [[32, 16, 1], [16, 16, 1], [16, 8, 1], [8, 8, 1], [8, 4, 1], [4, 4, 1]];
const DQ_SW: [number, number, number][] = [[32, 16, 1], [16, 16, 1], [16, 8, 1], [8, 8, 1], [4, 4, 1]];

function pick(
  D: number,
  limit: number,
  maxThreads: number,
  list: [number, number, number][],
  bytes: (D: number, a: number, b: number, c: number) => number,
): [number, number, number] {
  // Pass 0: at most 2 output vec4 chunks per thread and row; pass 1: at most 4; pass 2: anything that fits.
  for (const maxDC of [2, 4, Infinity])
    for (const c of list) {
      const { DC, NT } = tileShape(D, c[0], c[1], c[2]);
      if (bytes(D, c[0], c[1], c[2]) > limit || NT > maxThreads || DC > maxDC) continue;
      return c;
    }
  return list[list.length - 1]!;
}

const cache = new WeakMap<Context, Map<number, AttentionTiles>>();

/** The tile sizes chosen for head dim `D` on this device: the first candidate that fits its workgroup-memory
 *  and thread limits with few accumulators per thread (software adapters use lists that compile quickly). */
export function attentionTiles(ctx: Context, D: number): AttentionTiles {
  let m = cache.get(ctx);
  if (!m) cache.set(ctx, (m = new Map()));
  let t = m.get(D);
  if (!t) {
    const limit = ctx.info.limits.maxComputeWorkgroupStorageSize ?? 16384;
    const maxT = ctx.info.limits.maxComputeInvocationsPerWorkgroup ?? 256;
    const sw = ctx.info.isSoftware;
    t = {
      fwd: pick(D, limit, maxT, sw ? FWD_SW : FWD, fwdBytes),
      dkdv: pick(D, limit, maxT, sw ? DKDV_SW : DKDV, dkdvBytes),
      dq: pick(D, limit, maxT, sw ? DQ_SW : DQ, dqBytes),
    };
    m.set(D, t);
  }
  return t;
}

/** Check user-given tiles: a multiple of 4, b a multiple of c, within the device's limits. */
export function checkTiles(ctx: Context, D: number, t: AttentionTiles): void {
  const limit = ctx.info.limits.maxComputeWorkgroupStorageSize ?? 16384;
  const maxInv = ctx.info.limits.maxComputeInvocationsPerWorkgroup ?? 256;
  const parts: [string, AttentionTile, (D: number, a: number, b: number, c: number) => number][] = [
    ['fwd', t.fwd, fwdBytes],
    ['dkdv', t.dkdv, dkdvBytes],
    ['dq', t.dq, dqBytes],
  ];
  for (const [name, tile, bytesOf] of parts) {
    const [a, b, c = 4] = tile;
    const ok = [a, b, c].every((x) => Number.isInteger(x) && x >= 1 && x <= 256) && a % 4 === 0 && b % c === 0;
    if (!ok) throw new ConfigError(`attention tiles.${name} [${tile.join(', ')}]: need a multiple of 4, b a multiple of c, all in 1..256`);
    const { NT } = tileShape(D, a, b, c);
    if (NT > maxInv) throw new ConfigError(`attention tiles.${name} [${tile.join(', ')}] needs ${NT} threads (device max ${maxInv})`);
    const bytes = bytesOf(D, a, b, c);
    if (bytes > limit)
      throw new ConfigError(`attention tiles.${name} [${tile.join(', ')}] needs ${bytes} bytes of workgroup memory at D=${D} (device max ${limit})`);
  }
}
