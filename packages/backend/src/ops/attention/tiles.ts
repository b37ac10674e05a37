import type { Context } from '../../context';
import { ConfigError } from '../../errors';
import { rowLayout } from './common';

/**
 * Tile sizes of the flash-attention kernels (each a multiple of 4; every thread owns a 4 x 4 block of scores):
 * - `fwd: [BR, BC]`: query rows per workgroup, keys per tile;
 * - `dkdv: [BC, BR]`: keys per workgroup, query rows per step;
 * - `dq: [BR, BC]`: query rows per workgroup, keys per step.
 */
export interface AttentionTiles {
  fwd: readonly [number, number];
  dkdv: readonly [number, number];
  dq: readonly [number, number];
}

const V4 = 16;

/** Workgroup bytes of the forward kernel (see attention-fwd.wgsl). */
export function fwdBytes(D: number, br: number, bc: number): number {
  const { DV, DS } = rowLayout(D);
  const TR = br / 4;
  const TC = bc / 4;
  const DC = Math.ceil(DV / TC);
  const PS = TR + 1;
  return V4 * (br * DS + bc * DS + TC * DC + bc * PS + TC * PS) + 4 * bc;
}

/** Workgroup bytes of the dK/dV kernel (see attention-bwd-dkdv.wgsl). */
export function dkdvBytes(D: number, bc: number, br: number): number {
  const { DV, DS } = rowLayout(D);
  const TK = bc / 4;
  const TQ = br / 4;
  const DC = Math.ceil(DV / TQ);
  const PS = TK + 1;
  return V4 * (2 * bc * DS + 2 * (br * DS + TQ * DC) + 2 * br * PS) + 8 * br + 4 * bc;
}

/** Workgroup bytes of the dQ kernel (see attention-bwd-dq.wgsl). */
export function dqBytes(D: number, br: number, bc: number): number {
  const { DV, DS } = rowLayout(D);
  const TR = br / 4;
  const TC = bc / 4;
  const DC = Math.ceil(DV / TC);
  const PS = TR + 1;
  return V4 * (2 * br * DS + 2 * bc * DS + TC * DC + bc * PS) + 4 * bc;
}

// Preference order: bigger tiles first; a thread keeps at most 4 output vec4 chunks per row on the first pass.
const FWD: [number, number][] = [[64, 32], [32, 32], [64, 16], [32, 16], [16, 16], [16, 8], [8, 8], [8, 4], [4, 4]];
const DKDV: [number, number][] = [[32, 32], [32, 16], [16, 16], [16, 8], [8, 8], [8, 4], [4, 4]];
const DQ: [number, number][] = [[64, 16], [32, 32], [32, 16], [16, 16], [16, 8], [8, 8], [8, 4], [4, 4]];

function pick(
  D: number,
  limit: number,
  list: [number, number][],
  bytes: (D: number, a: number, b: number) => number,
  threadsPerRow: (a: number, b: number) => number,
): [number, number] {
  const DV = Math.ceil(D / 4);
  for (const pass of [0, 1])
    for (const c of list) {
      if (bytes(D, c[0], c[1]) > limit) continue;
      if (pass === 0 && Math.ceil(DV / threadsPerRow(c[0], c[1])) > 4) continue;
      return c;
    }
  return list[list.length - 1]!;
}

const cache = new WeakMap<Context, Map<number, AttentionTiles>>();

/** The tile sizes chosen for head dim `D` on this device (largest that fit its workgroup-memory limit). */
export function attentionTiles(ctx: Context, D: number): AttentionTiles {
  let m = cache.get(ctx);
  if (!m) cache.set(ctx, (m = new Map()));
  let t = m.get(D);
  if (!t) {
    const limit = ctx.info.limits.maxComputeWorkgroupStorageSize ?? 16384;
    t = {
      fwd: pick(D, limit, FWD, fwdBytes, (_br, bc) => bc / 4),
      dkdv: pick(D, limit, DKDV, dkdvBytes, (_bc, br) => br / 4),
      dq: pick(D, limit, DQ, dqBytes, (_br, bc) => bc / 4),
    };
    m.set(D, t);
  }
  return t;
}

/** Check user-given tiles: multiples of 4, at most 256, within the device's workgroup memory. */
export function checkTiles(ctx: Context, D: number, t: AttentionTiles): void {
  const limit = ctx.info.limits.maxComputeWorkgroupStorageSize ?? 16384;
  const maxInv = ctx.info.limits.maxComputeInvocationsPerWorkgroup ?? 256;
  const parts: [string, readonly [number, number], number][] = [
    ['fwd', t.fwd, fwdBytes(D, t.fwd[0], t.fwd[1])],
    ['dkdv', t.dkdv, dkdvBytes(D, t.dkdv[0], t.dkdv[1])],
    ['dq', t.dq, dqBytes(D, t.dq[0], t.dq[1])],
  ];
  for (const [name, [a, b], bytes] of parts) {
    if (!(a % 4 === 0 && b % 4 === 0 && a >= 4 && b >= 4 && a <= 256 && b <= 256))
      throw new ConfigError(`attention tiles.${name} [${a}, ${b}] must be multiples of 4 in 4..256`);
    if ((a / 4) * (b / 4) > maxInv)
      throw new ConfigError(`attention tiles.${name} [${a}, ${b}] needs ${(a / 4) * (b / 4)} threads (device max ${maxInv})`);
    if (bytes > limit)
      throw new ConfigError(`attention tiles.${name} [${a}, ${b}] needs ${bytes} bytes of workgroup memory at D=${D} (device max ${limit})`);
  }
}
