/**
 * The tensor-core matmul's workgroup tiles: what a tile is (`TcTile`), the named kernel variants measured so far
 * (`TC_TILES`; `src/bench/matmul-tc-bench.ts --sweep` measures them) and the tuning of `auto`'s choice among them
 * (`tcTuning`). matmul-tc.ts checks a tile against the adapter and runs it.
 */
/** A workgroup tile of the tensor-core kernel, in elements: BM x BN of C per workgroup over an SGM x SGN grid
 *  of subgroups, BK of K staged per step (a multiple of the fragment's K), and how the slices are staged: a
 *  kernel variant (`TC_TILES` names them; `src/bench/matmul-tc-bench.ts --sweep` measures them all). */
export interface TcTile {
  bm: number;
  bn: number;
  bk: number;
  sgm: number;
  sgn: number;
  /** Halves per global load and staged unit: 8 (one 16-byte load, 8 scalar workgroup stores; default) or 2 (one
   *  32-bit word per lane: consecutive lanes store consecutive words, no bank conflicts). */
  vw?: 2 | 8;
  /** Workgroup buffers per operand: 2 (default: the next slice goes into the other buffer, one barrier per
   *  step) or 1 (two barriers per step, half the workgroup memory: room for a larger BK). */
  nbuf?: 1 | 2;
  /** Stage interior slices as SM x SK subgroup-matrix blocks (subgroupMatrixLoad from storage,
   *  subgroupMatrixStore into workgroup memory); edge slices take the element path. */
  cm?: boolean;
  /** Per-unit global and workgroup offsets computed once before the K loop; slices that lie wholly inside both
   *  operands (with vector loads) load and store through them without bounds checks. */
  hoist?: boolean;
  /** With `hoist`: derive the offsets of a thread's later units from its first (a constant number of rows
   *  further), so that two registers per operand hold them instead of two per unit. */
  derive?: boolean;
  /** Load each right fragment just before the multiply-accumulates that use it (else all fragments of a K step
   *  first). */
  ilv?: boolean;
  /** Grouped rasterisation: consecutive workgroups walk `gm` tile rows down a column before moving right
   *  (L2 reuse of B); 0 / absent: row by row. */
  gm?: number;
  /** Timing ablations only (wrong results; never in `TC_TILES`): leave out the multiply-accumulates, the
   *  staging of every slice after the first, or the stores of full tiles (kept behind a run-time condition that
   *  never holds, so the product is still computed). */
  ablate?: 'nomma' | 'nostage' | 'nostore';
  /** Subgroups whose epilogue scratch tiles exist at once (default all): fewer take turns (a barrier per round)
   *  and leave workgroup memory for deeper slices. Divides sgm * sgn. */
  cs?: number;
  /** Slices held in registers ahead of the staged one (default 1): 2 keeps two register sets, so the global loads
   *  of slice t + 2 are issued while slice t is multiplied and have two steps to arrive. */
  pf?: 1 | 2;
  /** Workgroup memory as one WGSL `buffer` (language extension `buffer_view`) seen through typed views: a unit
   *  goes into its slice with one store of its width (else 8 or 2 f16 stores), and the epilogue scratch lies over
   *  the staged slices instead of beside them (8 KiB more for the slices). Not with `cm`. */
  bv?: boolean;
  /** With `bv`: full tiles leave through workgroup memory (each subgroup's result rows, one band of SM rows at a
   *  time, then written to C by its lanes along the rows: whole 128-byte lines per store instruction) instead of
   *  fragment stores straight to C. Generated in the unrolled form (`tcTuning.unroll`); the array form keeps the
   *  fragment stores. */
  sd?: boolean;
  /** With `sd`: the other tiles (partial ones, bias, alpha, accumulate, the f16x3 factors) leave through the same
   *  bands, with their epilogue, instead of one scratch fragment at a time. */
  sde?: boolean;
}

/** The kernel variants (tiles with their staging) that tests check and the sweep measures; `auto` picks
 *  `tcTuning.big` / `tcTuning.small`. The first six are the plain forms measured on 2026-11-24 (16-byte loads, two
 *  buffers); v1.. are the numbered variants of the 2026-11-24 sweep (docs/PERFORMANCE.md). */
export const TC_TILES = {
  t128x128: { bm: 128, bn: 128, bk: 32, sgm: 2, sgn: 4 },
  t128x128w4: { bm: 128, bn: 128, bk: 32, sgm: 2, sgn: 2 },
  t128x64: { bm: 128, bn: 64, bk: 32, sgm: 2, sgn: 2 },
  t64x64: { bm: 64, bn: 64, bk: 32, sgm: 2, sgn: 2 },
  t128x256k16: { bm: 128, bn: 256, bk: 16, sgm: 2, sgn: 4 },
  t64x64k64: { bm: 64, bn: 64, bk: 64, sgm: 2, sgn: 2 },
  v1: { bm: 128, bn: 256, bk: 16, sgm: 2, sgn: 4, vw: 2 },
  v2: { bm: 128, bn: 256, bk: 32, sgm: 2, sgn: 4, vw: 2, nbuf: 1 },
  v3: { bm: 128, bn: 256, bk: 32, sgm: 2, sgn: 4, nbuf: 1 },
  v4: { bm: 128, bn: 256, bk: 16, sgm: 2, sgn: 4, cm: true },
  v5: { bm: 128, bn: 256, bk: 32, sgm: 2, sgn: 4, nbuf: 1, cm: true },
  v6: { bm: 128, bn: 128, bk: 32, sgm: 2, sgn: 2, vw: 2 },
  v7: { bm: 128, bn: 128, bk: 32, sgm: 2, sgn: 2, cm: true },
  v8: { bm: 128, bn: 128, bk: 64, sgm: 2, sgn: 2, vw: 2, nbuf: 1 },
  v9: { bm: 256, bn: 128, bk: 16, sgm: 4, sgn: 2, vw: 2 },
  v10: { bm: 256, bn: 128, bk: 32, sgm: 4, sgn: 2, vw: 2, nbuf: 1 },
  v11: { bm: 128, bn: 256, bk: 16, sgm: 4, sgn: 4, vw: 2 },
  v12: { bm: 128, bn: 128, bk: 32, sgm: 2, sgn: 4, vw: 2 },
  v13: { bm: 128, bn: 128, bk: 64, sgm: 2, sgn: 2, nbuf: 1, cm: true },
  v14: { bm: 128, bn: 256, bk: 32, sgm: 2, sgn: 4, nbuf: 1, hoist: true },
  v15: { bm: 128, bn: 256, bk: 48, sgm: 2, sgn: 4, nbuf: 1, hoist: true },
  v16: { bm: 256, bn: 128, bk: 32, sgm: 4, sgn: 2, nbuf: 1, hoist: true },
  v17: { bm: 128, bn: 256, bk: 32, sgm: 4, sgn: 4, nbuf: 1, hoist: true },
  v18: { bm: 128, bn: 256, bk: 16, sgm: 2, sgn: 4, hoist: true },
  v19: { bm: 128, bn: 128, bk: 32, sgm: 2, sgn: 4, hoist: true },
  v20: { bm: 128, bn: 256, bk: 32, sgm: 2, sgn: 4, vw: 2, nbuf: 1, hoist: true },
  v21: { bm: 128, bn: 128, bk: 32, sgm: 2, sgn: 2, hoist: true },
  v22: { bm: 128, bn: 128, bk: 64, sgm: 2, sgn: 2, nbuf: 1, hoist: true },
  v23: { bm: 128, bn: 128, bk: 32, sgm: 4, sgn: 2, hoist: true },
  v24: { bm: 128, bn: 256, bk: 32, sgm: 2, sgn: 4, nbuf: 1, hoist: true, derive: true },
  v25: { bm: 128, bn: 256, bk: 48, sgm: 2, sgn: 4, nbuf: 1, hoist: true, derive: true },
  v26: { bm: 128, bn: 256, bk: 32, sgm: 2, sgn: 4, nbuf: 1, hoist: true, derive: true, ilv: true },
  v27: { bm: 128, bn: 256, bk: 32, sgm: 2, sgn: 4, nbuf: 1, hoist: true, derive: true, gm: 8 },
  v28: { bm: 256, bn: 128, bk: 32, sgm: 4, sgn: 2, nbuf: 1, hoist: true, derive: true },
  // v15 with 4 scratch tiles instead of 8 (two epilogue rounds): its 48-deep slices then fit an [N, K] B as well
  v29: { bm: 128, bn: 256, bk: 48, sgm: 2, sgn: 4, nbuf: 1, hoist: true, cs: 4 },
  // v14 with a two-deep register prefetch (`pf` 2). H100, 2026-11-24 (seventh session): NT 216.9 / 229.2 / 193.3
  // TFLOP/s against v29's 210.6 / 223.0 / 196.1, NN as v15's, TN 1-2% above; the same prefetch on v15, v29 and
  // v18 (k16) was slower everywhere and is not kept (docs/PERFORMANCE.md)
  v30: { bm: 128, bn: 256, bk: 32, sgm: 2, sgn: 4, nbuf: 1, hoist: true, pf: 2 },
  // buffer views (`bv`): 16-byte stores into the staged slices, the scratch over them (so v15's slices fit NT)
  v34: { bm: 128, bn: 256, bk: 48, sgm: 2, sgn: 4, nbuf: 1, hoist: true, bv: true },
  v35: { bm: 128, bn: 256, bk: 32, sgm: 2, sgn: 4, nbuf: 1, hoist: true, pf: 2, bv: true },
  v36: { bm: 128, bn: 256, bk: 32, sgm: 2, sgn: 4, nbuf: 1, hoist: true, bv: true },
  v37: { bm: 256, bn: 128, bk: 48, sgm: 4, sgn: 2, nbuf: 1, hoist: true, bv: true },
  v38: { bm: 128, bn: 256, bk: 48, sgm: 2, sgn: 4, nbuf: 1, hoist: true, bv: true, gm: 8 },
  v39: { bm: 128, bn: 256, bk: 48, sgm: 2, sgn: 4, nbuf: 1, hoist: true, bv: true, ilv: true },
  v40: { bm: 128, bn: 256, bk: 48, sgm: 2, sgn: 4, nbuf: 1, hoist: true, bv: true, derive: true },
  v41: { bm: 128, bn: 256, bk: 48, sgm: 4, sgn: 4, nbuf: 1, hoist: true, bv: true },
  v42: { bm: 256, bn: 128, bk: 48, sgm: 4, sgn: 2, nbuf: 1, hoist: true, bv: true, derive: true },
  // v34 and v37 with full tiles stored through workgroup memory (`sd`)
  v59: { bm: 128, bn: 256, bk: 48, sgm: 2, sgn: 4, nbuf: 1, hoist: true, bv: true, sd: true },
  v60: { bm: 256, bn: 128, bk: 48, sgm: 4, sgn: 2, nbuf: 1, hoist: true, bv: true, sd: true },
  // v59 / v60 with the other tiles through the bands as well (`sde`)
  v61: { bm: 128, bn: 256, bk: 48, sgm: 2, sgn: 4, nbuf: 1, hoist: true, bv: true, sd: true, sde: true },
  v62: { bm: 256, bn: 128, bk: 48, sgm: 4, sgn: 2, nbuf: 1, hoist: true, bv: true, sd: true, sde: true },
  // 64-deep slices (K-major rows of 128 bytes, whole cache lines) on 192-wide tiles of 8 subgroups, which fit the
  // 48 KiB with both operands K-major (NT): 128x192 (subgroups of 64x48) and 192x128 (48x64); v65 / v66 with
  // `derive`. H100, 2026-12-07 (sixteenth session): about the same speed in every layout (v65: 215-237 TFLOP/s
  // on 4096^3, NT the fastest), a wave of 128x192 tiles in 0.66-0.71 of the time of a wave of v59's in NT
  v63: { bm: 128, bn: 192, bk: 64, sgm: 2, sgn: 4, nbuf: 1, hoist: true, bv: true, sd: true },
  v64: { bm: 192, bn: 128, bk: 64, sgm: 4, sgn: 2, nbuf: 1, hoist: true, bv: true, sd: true },
  v65: { bm: 128, bn: 192, bk: 64, sgm: 2, sgn: 4, nbuf: 1, hoist: true, bv: true, sd: true, derive: true },
  v66: { bm: 192, bn: 128, bk: 64, sgm: 4, sgn: 2, nbuf: 1, hoist: true, bv: true, sd: true, derive: true },
} as const satisfies Record<string, TcTile>;
export type TcTileName = keyof typeof TC_TILES;

/** Tuning of `auto` (a benchmark may change it): the big and small tile and the tile count below which the
 *  small one runs. Measured on an H100 (2026-12-07, fifteenth session, `matmul-tc-bench --sweep`,
 *  docs/PERFORMANCE.md): v59 (v34's 128x256x48 tile through buffer views, full tiles stored through workgroup
 *  memory) runs 258.0 / 231.8 / 271.4 TFLOP/s (NN / NT / TN) on 4096^3, 266.0 / 241.6 / 276.0 on 8192x2048x5632 and
 *  248.5 / 225.4 / 261.5 on 8192x5632x2048, against v34's 246.8 / 220.2 / 261.2, 263.3 / 233.3 / 272.5 and
 *  230.6 / 206.2 / 239.7 in the same call (v34's fragment stores straight to C cost it about 10%: its `nostore`
 *  ablation ran 275.5 / 240.8 / 290.0 on 4096^3). */
export const tcTuning: {
  big: TcTileName;
  bigTN: TcTileName;
  bigNT: TcTileName;
  bigNTWave: number;
  bigNTMargin: number;
  tail: boolean;
  tailMinSlices: number;
  tailCost: number;
  viaTN: { nt: Partial<Record<TcTileName, number>>; tn: number; copyUs: number; secondUs: number; bw: number; margin: number } | null;
  viaPair: boolean;
  bigAlt: TcTileName;
  small: TcTileName;
  minBigTiles: number;
  tilesPerUnit: number;
  units?: number | null;
  direct: boolean;
  unroll: boolean;
} = {
  big: 'v59',
  /** The big tile of the TN layout (A stored [K, M], as in a weight gradient X^T dY): v62, v37's 256x128x48 with
   *  v59's stores and its other tiles through the same bands (`sde`): 284.2-284.3 / 292.2 / 272.1-272.6 TFLOP/s on
   *  4096^3 / 8192x2048x5632 / 8192x5632x2048 on the H100 (2026-12-07, two sweeps; v59 there: 272.4-272.8 /
   *  276.1-276.3 / 260.7-261.4). Same area as `big`, so `minBigTiles` holds for both. (The band epilogue costs v59's
   *  NN about 3.5%, 249.4-249.7 as v61, so `big` keeps the fragment-at-a-time scratch.) */
  bigTN: 'v62',
  /** The big tile of the NT layout (both operands K-major, as in `x W^T`) where the adapter's compute units are
   *  known (`tcWave`): v65, 128x192 with 64-deep slices. A wave of its tiles takes `bigNTWave` of the time of a
   *  wave of `big`'s (H100, 2026-12-07: 0.66 on 8192x5632x2048, 0.68 on 2048x5632x2048, 0.69-0.71 on 2048 x 2048),
   *  so `chooseTcTile` takes it where its waves times that are at least `bigNTMargin` fewer than `big`'s: 251 against
   *  225 TFLOP/s on 8192x5632x2048 and 217-219 against 197-198 on 2048x5632x2048 (the 1.1B LoRA step's gate / up
   *  projections). 4096^3 and 8192x2048x5632 (6 waves against 4) take it only with the split tail that `tcWaveTime`
   *  counts (5 1/3 waves): 239.0 / 242.7 against `big`'s 232.5 / 242.0 (2026-12-07, seventeenth session). */
  bigNT: 'v65',
  bigNTWave: 0.66,
  bigNTMargin: 0.05,
  /** Split the tail where the compute units are known (`tcTail`): a last wave of at most half the units' tiles runs
   *  as K chunks of them in the same dispatch, summed by a second kernel. */
  tail: true,
  /** The fewest BK-slices of K in a chunk of a split tail. */
  tailMinSlices: 4,
  /** What a split tail costs beyond its chunks' time, in waves (the partial stores and the summing kernel):
   *  `tcWaveTime` counts it where it compares tiles. */
  tailCost: 0.1,
  /** x W^T through TN where the compute units are known (`tcViaTN`): both operands transposed by the 16-bit
   *  transpose (shaders/transpose-reg16.wgsl), then the TN product, where the model's time is at least `margin`
   *  below the NT product's. Fitted on an H100 (2026-12-07, nineteenth session): us per wave per unit of K of
   *  v59 and v65 in NT (148 us a wave at K 4096; 0.025: 559 us for 4096^3's 5 1/3 waves, 757 for 8192x5632x2048's
   *  15 at K 2048) and of bigTN (v62) in TN (485 us for 4096^3's 4 waves, 647 for 8192x2048x5632's 4 at K 5632).
   *  The copies take `copyUs` plus 4 (M + N) K bytes at 3.1 TB/s in one dispatch (`viaPair`; twentieth session:
   *  53.6-53.8 us for two 4096 x 4096 operands, 47.0-47.1 for 8192 x 2048 and 5632 x 2048, both within 0.3 us of the model),
   *  and `secondUs` more as two dispatches (62.6-62.8 and 55.8-56.0 us; the nineteenth session's fit, 20 us, was
   *  within 4 us of all six products it timed). Measured through TN with the pair (twentieth session, two H100s):
   *  4096^3 NT 254.8-255.8 TFLOP/s (250.2-250.9 with two dispatches, 238-240 without the route), 8192x5632x2048
   *  255.0-255.9 (251.8-252.5; 248.5-250), 8192x2048x5632 256.6-256.9 (which two dispatches leave NT:
   *  243.6-245.1). The 1.1B LoRA step's 2048-token products lose through TN (2048^3 159 against 197,
   *  2048x5632x2048 198 against 216) and the model keeps them NT. */
  viaTN: { nt: { v59: 0.0361, v65: 0.025 }, tn: 0.0296, copyUs: 10.5, secondUs: 9.5, bw: 3.1e12, margin: 0.01 },
  /** x W^T through TN transposes both operands in one dispatch (`transposePair16`) where true, one each where
   *  false (`secondUs` more in the model). */
  viaPair: true,
  /** The big tile where `big` does not fit (no `buffer_view` in the adapter's WGSL): v29, v15 with half the
   *  epilogue scratch, which fits every layout. H100 (2026-11-24): 228 / 212 / 237-239 TFLOP/s on 4096^3, NT
   *  197-200 on 8192x5632x2048. */
  bigAlt: 'v29',
  small: 't64x64',
  /** 96: a 2048 x 2048 output (128 big tiles, one wave on a 132-SM H200) runs the big tile. Measured in the 1.1B
   *  LoRA step (lora-step-1b, H200, 2026-11-24): at 264 its 242 products per step on the 64x64 tile took 62 ms,
   *  on the big tile 128x256 the step went from 217 to 170 ms. */
  minBigTiles: 96,
  /** Big tiles that run at once on one compute unit (one on an H100: their registers), so that a wave is
   *  `units * tilesPerUnit` tiles. */
  tilesPerUnit: 1,
  /** The adapter's compute units for wave planning: undefined looks them up (`computeUnits`), null turns the
   *  planning off, a number overrides. */
  units: undefined,
  /** Store full tiles straight from the accumulators to C (else every tile goes through the scratch). */
  direct: true,
  /** Unroll the fragment loops into named accumulators (`tcMatrixCode`). Measured on an H200 (2026-11-24,
   *  docs/PERFORMANCE.md): the array form ran at 24-40 TFLOP/s for every tile (its matrices live in local
   *  memory); unrolled, the 128x256x16 tile runs 107-120 TFLOP/s on 4096^3 and both LLM shapes, every layout. */
  unroll: true,
};
