import { afterAll, describe, expect, it } from 'vitest';
import { createContext, type Context, type ContextInfo } from '../../context';
import { kernelSource } from '../../kernel';
import { ConfigError, ShapeError } from '../../errors';
import { download, poison, release, upload } from '../../tensor';
import { randn, relErr } from '../../testing';
import { matmulRef, roundTo } from './core.ref';
import { matmul, matmulPath } from './matmul';
import { computeUnits } from '../../compute-units';
import { chooseTcTile, matmulTc, tcTail, tcTailSum, tcViaTN, tcWaves, tcWaveTime, tcKernelDef, TC_TILES, tcFailures, tcPrelude, tcSharedBytes, tcSource, tcTileKey, tcTileProblem, tcTuning, tensorCorePlan, tensorCoresReady, type TensorCorePlan } from './matmul-tc';
import { pipelineSequence, runTcCase, TC_TOL, tcCases } from './matmul-tc.cases';

const ctx: Context = await createContext();
afterAll(() => ctx.destroy());

type PlanInfo = Pick<ContextInfo, 'features' | 'subgroupMatrixConfigs' | 'subgroupSizes' | 'wgslFeatures'>;
const f16f32 = (M: number, N: number, K: number) => ({ M, N, K, componentType: 'f16', resultComponentType: 'f32' });
function fakeInfo(o: Partial<{ sm: boolean; f16: boolean; configs: PlanInfo['subgroupMatrixConfigs']; sizes: [number, number]; wgsl: string[] }>): PlanInfo {
  return {
    wgslFeatures: o.wgsl ?? ['buffer_view'],
    features: { shaderF16: o.f16 ?? true, subgroups: true, timestampQuery: true, subgroupMatrix: o.sm ?? true },
    subgroupMatrixConfigs: o.configs ?? [],
    subgroupSizes: { min: o.sizes?.[0] ?? 32, max: o.sizes?.[1] ?? 32 },
  };
}
const NVIDIA = [f16f32(16, 8, 16), f16f32(16, 16, 16), { ...f16f32(16, 16, 16), resultComponentType: 'f16' }, { M: 16, N: 16, K: 32, componentType: 'i8', resultComponentType: 'i32' }];
const H200_LIMITS = { maxComputeInvocationsPerWorkgroup: 1024, maxComputeWorkgroupStorageSize: 49152 };

describe('tensor-core path selection (runs everywhere)', () => {
  it('takes the fragment from the configurations the adapter reports', () => {
    const nv = tensorCorePlan(fakeInfo({ configs: NVIDIA })) as TensorCorePlan;
    expect(nv.frag).toMatchObject({ M: 16, N: 16, K: 16, resultComponentType: 'f32' });
    expect(nv.subgroupSize).toBe(32);
    const only168 = tensorCorePlan(fakeInfo({ configs: [f16f32(16, 8, 16)] })) as TensorCorePlan;
    expect(only168.frag).toMatchObject({ M: 16, N: 8, K: 16 });
    const apple = tensorCorePlan(fakeInfo({ configs: [f16f32(8, 8, 8)] })) as TensorCorePlan;
    expect(apple.frag).toMatchObject({ M: 8, N: 8, K: 8 });
  });

  it('falls back with a reason: no feature, no shader-f16, no f16 -> f32 config, a varying subgroup size', () => {
    expect(tensorCorePlan(fakeInfo({ sm: false, configs: NVIDIA }))).toEqual({ reason: expect.stringMatching(/subgroup-matrix/) });
    expect(tensorCorePlan(fakeInfo({ f16: false, configs: NVIDIA }))).toEqual({ reason: expect.stringMatching(/shader-f16/) });
    expect(tensorCorePlan(fakeInfo({ configs: [NVIDIA[2]!, NVIDIA[3]!] }))).toEqual({ reason: expect.stringMatching(/f16 -> f32/) });
    expect(tensorCorePlan(fakeInfo({ configs: NVIDIA, sizes: [8, 32] }))).toEqual({ reason: expect.stringMatching(/not fixed/) });
  });

  it('fits tiles to the fragment and the limits, and writes the fragment shape into the kernel', () => {
    const nv = tensorCorePlan(fakeInfo({ configs: NVIDIA })) as TensorCorePlan;
    const n8 = tensorCorePlan(fakeInfo({ configs: [f16f32(16, 8, 16)] })) as TensorCorePlan;
    const apple = tensorCorePlan(fakeInfo({ configs: [f16f32(8, 8, 8)] })) as TensorCorePlan;
    for (const p of [nv, n8, apple]) for (const t of Object.values(TC_TILES)) expect(tcTileProblem(t, p, H200_LIMITS)).toBeNull();
    expect(tcTileProblem({ bm: 48, bn: 64, bk: 32, sgm: 2, sgn: 2 }, nv, H200_LIMITS)).toMatch(/fragment's M 16/);
    // buffer views need the language extension; the scratch over the slices lets v15's 48-deep slices fit NT
    expect(tcTileProblem(TC_TILES.v34, tensorCorePlan(fakeInfo({ configs: NVIDIA, wgsl: [] })) as TensorCorePlan, H200_LIMITS)).toMatch(/buffer_view/);
    expect(tcTileProblem({ ...TC_TILES.v34, bv: false }, nv, H200_LIMITS, false, true)).toMatch(/workgroup memory/);
    expect(tcTileProblem(TC_TILES.v34, nv, H200_LIMITS, false, true)).toBeNull();
    expect(tcTileProblem({ bm: 64, bn: 64, bk: 24, sgm: 2, sgn: 2 }, nv, H200_LIMITS)).toMatch(/BK 24/);
    expect(tcTileProblem(TC_TILES.t128x128, nv, { ...H200_LIMITS, maxComputeWorkgroupStorageSize: 16384 })).toMatch(/workgroup memory/);
    expect(tcTileProblem(TC_TILES.t128x128, nv, { ...H200_LIMITS, maxComputeInvocationsPerWorkgroup: 128 })).toMatch(/threads/);
    // big products get the big tile, small ones the small tile; a device too small for the big one gets a smaller one
    expect(chooseTcTile(nv, H200_LIMITS, { M: 4096, N: 4096, batch: 1, transA: false, transB: false })).toBe(TC_TILES[tcTuning.big]);
    // TN has its own big tile; NT and TT take the common one
    expect(chooseTcTile(nv, H200_LIMITS, { M: 4096, N: 4096, batch: 1, transA: true, transB: false })).toBe(TC_TILES[tcTuning.bigTN]);
    expect(chooseTcTile(nv, H200_LIMITS, { M: 4096, N: 4096, batch: 1, transA: false, transB: true })).toBe(TC_TILES[tcTuning.big]);
    expect(chooseTcTile(nv, H200_LIMITS, { M: 4096, N: 4096, batch: 1, transA: true, transB: true })).toBe(TC_TILES[tcTuning.big]);
    // a layout the big tile does not fit (its slices of a transposed B exceed the workgroup memory): the alternative
    if (tcTileProblem(TC_TILES[tcTuning.big], nv, H200_LIMITS, false, true))
      expect(chooseTcTile(nv, H200_LIMITS, { M: 4096, N: 4096, batch: 1, transA: false, transB: true })).toBe(TC_TILES[tcTuning.bigAlt]);
    for (const [ta, tb] of [[false, false], [false, true], [true, false]] as const)
      expect(tcTileProblem(TC_TILES[tcTuning.bigAlt], nv, H200_LIMITS, ta, tb)).toBeNull();
    expect(chooseTcTile(nv, H200_LIMITS, { M: 2048, N: 16, batch: 1, transA: false, transB: true })).toBe(TC_TILES.t64x64);
    // the 1.1B LoRA step's 2048-token products: 2048 x 2048 (128 big tiles, one wave on a 132-SM GPU) runs the big
    // tile (on the 64x64 tile these took 62 of 217 ms per step on an H200); 2048 x 256 (16 big tiles) the small one
    expect(chooseTcTile(nv, H200_LIMITS, { M: 2048, N: 2048, batch: 1, transA: false, transB: false })).toBe(TC_TILES[tcTuning.big]);
    expect(chooseTcTile(nv, H200_LIMITS, { M: 2048, N: 256, batch: 1, transA: false, transB: true })).toBe(TC_TILES.t64x64);
    expect(tcTileProblem(TC_TILES[tcTuning.bigAlt], nv, { ...H200_LIMITS, maxComputeWorkgroupStorageSize: 32768 })).toMatch(/workgroup memory/);
    // v15's 48-deep slices of an [N, K] B fit 48 KiB only with half the epilogue scratch (v29: two rounds)
    expect(tcTileProblem(TC_TILES.v15, nv, H200_LIMITS, false, true)).toMatch(/workgroup memory/);
    expect(tcTileProblem(TC_TILES.v29, nv, H200_LIMITS, false, true)).toBeNull();
    expect(tcTileProblem({ ...TC_TILES.v29, cs: 3 }, nv, H200_LIMITS)).toMatch(/cs 3 does not divide the 8 subgroups/);
    // stores through workgroup memory (sd) need buffer views; their bands (8 subgroups x 16 rows x (64 + 4) f32) lie
    // over the slices and count where the slices take less (16-deep: 128 x 24 + 16 x 264 halves, 14,592 bytes)
    expect(tcTileProblem({ ...TC_TILES.v59, bv: false }, nv, H200_LIMITS)).toMatch(/\(sd\) need buffer views/);
    expect(tcTileProblem({ ...TC_TILES.v62, sd: false }, nv, H200_LIMITS)).toMatch(/\(sde\) needs the band stores/);
    expect(tcSharedBytes({ ...TC_TILES.v59, bk: 16 }, nv, false, false)).toBe(4 * 8 * 16 * 68);
    expect(tcSharedBytes({ ...TC_TILES.v59, bk: 16, sd: false }, nv, false, false)).toBe(2 * (128 * 24 + 16 * 264));
    expect(tcSharedBytes(TC_TILES.v59, nv, false, true)).toBe(2 * (128 * 56 + 256 * 56));
    // without buffer_view in the adapter's WGSL the big tile (v59) does not fit at all: bigAlt runs every layout
    const noBv = tensorCorePlan(fakeInfo({ configs: NVIDIA, wgsl: [] })) as TensorCorePlan;
    for (const [ta, tb] of [[false, false], [false, true], [true, false]] as const)
      expect(chooseTcTile(noBv, H200_LIMITS, { M: 4096, N: 4096, batch: 1, transA: ta, transB: tb })).toBe(TC_TILES[tcTuning.bigAlt]);
    expect(chooseTcTile(nv, { ...H200_LIMITS, maxComputeWorkgroupStorageSize: 32768 }, { M: 4096, N: 4096, batch: 1, transA: false, transB: false })).toBe(TC_TILES.t64x64);
    const src = tcPrelude(n8, TC_TILES.t128x64, true, false);
    expect(src).toContain('alias Lm = subgroup_matrix_left<f16, 16, 16>;');
    expect(src).toContain('alias Rm = subgroup_matrix_right<f16, 8, 16>;');
    expect(src).toContain('alias Acc = subgroup_matrix_result<f32, 8, 16>;');
    expect(src).toMatch(/subgroupMatrixLoad<Lm, col_major>/);
    expect(src).toMatch(/subgroupMatrixLoad<Rm, row_major>/);
    expect(src).toContain('const FN: u32 = 4u;');
  });

  it('plans in waves where the compute units are known: the NT tile, and the units from the adapter\'s name', () => {
    const nv = tensorCorePlan(fakeInfo({ configs: NVIDIA })) as TensorCorePlan;
    const v65 = TC_TILES[tcTuning.bigNT];
    const big = TC_TILES[tcTuning.big];
    const nt = { M: 4096, N: 4096, batch: 1, transA: false, transB: true };
    // 4096^3: 704 tiles of 128 x 192 (6 waves of 132) against 512 of 128 x 256 (4 waves): the big tile in whole
    // waves; with K known, v65's last 44 tiles split in 3 chunks of 22, 22 and 20 of 64 slices: 5 + 22 / 64 + 0.1
    // waves against 4 (x 0.66 against x 0.95)
    expect(tcWaves(v65, nt, 132)).toBe(6);
    expect(tcWaves(big, nt, 132)).toBe(4);
    expect(chooseTcTile(nv, H200_LIMITS, nt, 132)).toBe(big);
    expect(tcTail(v65, { ...nt, K: 4096 }, 132)).toEqual({ full: 660, tiles: 44, chunks: 3, slices: 22 });
    expect(tcTail(big, { ...nt, K: 4096 }, 132)).toBeNull(); // 512 = 3 x 132 + 116: more than half a wave
    expect(tcWaveTime(v65, { ...nt, K: 4096 }, 132)).toBeCloseTo(5 + 22 / 64 + tcTuning.tailCost, 12);
    expect(tcWaveTime(big, { ...nt, K: 4096 }, 132)).toBe(4);
    expect(chooseTcTile(nv, H200_LIMITS, { ...nt, K: 4096 }, 132)).toBe(v65);
    // 8192 x 2048 x 5632: 704 tiles again, K in 88 slices: 3 chunks of 30, 30, 28
    expect(tcTail(v65, { ...nt, M: 8192, N: 2048, K: 5632 }, 132)).toEqual({ full: 660, tiles: 44, chunks: 3, slices: 30 });
    expect(chooseTcTile(nv, H200_LIMITS, { ...nt, M: 8192, N: 2048, K: 5632 }, 132)).toBe(v65);
    // a short K (chunks of at least tailMinSlices), a tail of more than half a wave, no whole wave, grouped rasters
    expect(tcTail(v65, { ...nt, K: 512 }, 132)).toEqual({ full: 660, tiles: 44, chunks: 2, slices: 4 });
    expect(tcTail(v65, { ...nt, K: 448 }, 132)).toBeNull(); // 7 slices
    expect(tcTail(v65, { ...nt, M: 8192, N: 5632, K: 2048 }, 132)).toBeNull(); // 1920 = 14 x 132 + 72
    expect(tcTail(v65, { ...nt, M: 1024, N: 1024, K: 4096 }, 132)).toBeNull(); // 48 tiles
    expect(tcTail({ ...v65, gm: 8 }, { ...nt, K: 4096 }, 132)).toBeNull();
    // x W^T through TN (both operands transposed in one dispatch), by the default model on the tile auto takes for
    // the NT product: 4096^3 (v65 with a split tail, 5.43 waves, 557 us, against 4 waves of v62, 485 us, + 54 us of
    // copies), 8192 x 5632 x 2048, 8192 x 2048 x 5632 (752 against 766 us) and a 2048-token LM head (1027 against
    // 1042); not the 1.1B LoRA step's 2048-token products (the head's 256-row chunks included), nor with two
    // dispatches where the model's margin is thinner (8192 x 2048 x 5632: 761 against 766), copies at 1 TB/s, an NT
    // tile without a rate; nor other layouts, batches, strided or unaligned operands, unknown compute units
    const lt = (M: number, N: number, K: number, o: object = {}) => ({ M, N, K, batch: 1, transA: false, transB: true, lda: K, ldb: K, ...o });
    const via = (M: number, N: number, K: number) => tcViaTN(lt(M, N, K), 132, chooseTcTile(nv, H200_LIMITS, lt(M, N, K), 132));
    expect(chooseTcTile(nv, H200_LIMITS, lt(4096, 4096, 4096), 132)).toBe(v65);
    for (const [M, N, K] of [[4096, 4096, 4096], [8192, 5632, 2048], [8192, 2048, 5632], [2048, 32000, 2048]]) expect(via(M!, N!, K!), `${M}x${N}x${K}`).toBe(true);
    for (const [M, N, K] of [[2048, 2048, 2048], [2048, 5632, 2048], [2048, 2048, 5632], [2048, 256, 2048], [256, 32000, 2048]]) expect(via(M!, N!, K!), `${M}x${N}x${K}`).toBe(false);
    tcTuning.viaPair = false;
    expect(via(4096, 4096, 4096)).toBe(true);
    expect(via(8192, 2048, 5632)).toBe(false);
    expect(via(2048, 32000, 2048)).toBe(false);
    tcTuning.viaPair = true;
    const model = tcTuning.viaTN!;
    tcTuning.viaTN = { ...model, bw: 1e12 };
    expect(via(4096, 4096, 4096)).toBe(false);
    tcTuning.viaTN = { ...model, nt: { v59: model.nt.v59 } };
    expect(via(4096, 4096, 4096)).toBe(false);
    tcTuning.viaTN = model;
    expect(tcViaTN(lt(4096, 4096, 4096), 132)).toBe(false); // no NT tile given
    expect(tcViaTN(lt(4096, 4096, 4096), null, v65)).toBe(false);
    expect(tcViaTN(lt(4096, 4096, 4096, { transB: false }), 132, v65)).toBe(false);
    expect(tcViaTN(lt(4096, 4096, 4096, { batch: 2 }), 132, v65)).toBe(false);
    expect(tcViaTN(lt(4096, 4096, 4096, { lda: 4104 }), 132, v65)).toBe(false);
    expect(tcViaTN(lt(4096, 4092, 4096), 132, v65)).toBe(false);
    expect(tcViaTN(lt(4096, 4096, 4096, { viaTN: false }), 132, v65)).toBe(false);
    expect(tcViaTN(lt(64, 64, 64, { viaTN: true }), null)).toBe(true);
    tcTuning.viaTN = null;
    expect(tcViaTN(lt(4096, 4096, 4096), 132, v65)).toBe(false);
    tcTuning.viaTN = model;
    const tuned = tcTuning.tail;
    tcTuning.tail = false;
    expect(chooseTcTile(nv, H200_LIMITS, { ...nt, K: 4096 }, 132)).toBe(big);
    tcTuning.tail = tuned;
    // 8192 x 5632: 1920 tiles (15 waves) against 1408 (11 waves): 15 x 0.66 = 9.9 < 11 x 0.95
    expect(chooseTcTile(nv, H200_LIMITS, { ...nt, M: 8192, N: 5632 }, 132)).toBe(v65);
    // the 1.1B LoRA step's gate / up projections, 2048 x 5632: 4 waves against 3; 2048 x 2048: 2 against 1
    expect(chooseTcTile(nv, H200_LIMITS, { ...nt, M: 2048, N: 5632 }, 132)).toBe(v65);
    expect(chooseTcTile(nv, H200_LIMITS, { ...nt, M: 2048, N: 2048 }, 132)).toBe(big);
    expect(chooseTcTile(nv, H200_LIMITS, { ...nt, M: 2048, N: 2048, K: 2048 }, 132)).toBe(big); // 1.44 x 0.66 against 0.95
    // other layouts, unknown compute units, a wave of another size
    expect(chooseTcTile(nv, H200_LIMITS, { ...nt, M: 8192, N: 5632, transB: false }, 132)).toBe(big);
    expect(chooseTcTile(nv, H200_LIMITS, { ...nt, M: 8192, N: 5632 }, null)).toBe(big);
    expect(chooseTcTile(nv, H200_LIMITS, nt, 704)).toBe(v65); // one wave each
    // the adapter's compute units: from its name (Dawn's, or the marketing one), or RUSTY_COMPUTE_UNITS (0: unknown;
    // a typed error when malformed)
    const named = (device: string, env?: string) => computeUnits({ device, description: '', vendor: 'nvidia' }, env);
    expect(named('nvidia-h100-80gb-hbm3')).toBe(132);
    expect(named('NVIDIA H100 80GB HBM3')).toBe(132);
    expect(named('NVIDIA H100 PCIe')).toBe(114);
    expect(named('nvidia-h200')).toBe(132);
    expect(named('NVIDIA A100-SXM4-80GB')).toBe(108);
    expect(named('nvidia-geforce-rtx-4090')).toBe(128);
    expect(named('llvmpipe (LLVM 19.1.7, 256 bits)')).toBeNull();
    expect(named('llvmpipe', '64')).toBe(64);
    expect(named('NVIDIA H100', '0')).toBeNull();
    expect(() => named('NVIDIA H100', 'many')).toThrow(ConfigError);
    expect(() => named('NVIDIA H100', '-1')).toThrow(ConfigError);
  });

  it('sums a split tail\'s chunks in order into its tiles of C (times alpha), within C\'s bounds and nowhere else', async () => {
    // 2 x [37, 50] on 16 x 24 tiles: 3 x 3 per batch (the last row and column partial), 18 in all; the last 4 (batch
    // 1: the last tile of row 1 and all of row 2) in 3 chunks each
    const [M, N, bm, bn, batch] = [37, 50, 16, 24, 2];
    const tail = { full: 14, tiles: 4, chunks: 3, slices: 1 };
    const pv = randn(tail.tiles * tail.chunks * bm * bn, 91);
    const part = upload(ctx, pv, [pv.length]);
    const out = upload(ctx, new Float32Array(batch * M * N), [batch, M, N]);
    poison(ctx, out);
    const alpha = -0.75;
    tcTailSum(ctx, part.buffer, out.buffer, { bm, bn }, { M, N, alpha }, tail);
    const got = await download(ctx, out);
    const want = new Float32Array(batch * M * N).fill(NaN);
    for (let r = 0; r < tail.tiles; r++) {
      const tile = tail.full + r;
      const [z, ty, tx] = [Math.floor(tile / 9), Math.floor((tile % 9) / 3), tile % 3];
      for (let e = 0; e < bm * bn; e++) {
        const [m, n] = [ty * bm + Math.floor(e / bn), tx * bn + (e % bn)];
        if (m >= M || n >= N) continue;
        let sum = 0;
        for (let j = 0; j < tail.chunks; j++) sum = Math.fround(sum + Math.fround(pv[(r * tail.chunks + j) * bm * bn + e]!));
        want[z * M * N + m * N + n] = Math.fround(alpha * sum);
      }
    }
    const written = want.filter((x) => !Number.isNaN(x)).length;
    expect(written).toBe(16 * 2 + 5 * 24 + 5 * 24 + 5 * 2); // tile (1, 2): 16 rows of 2 columns; row 2: 5 rows
    expect(got.filter((x) => !Number.isNaN(x)).length).toBe(written);
    for (let i = 0; i < want.length; i++) if (!Number.isNaN(want[i]!)) expect(got[i]).toBe(want[i]);
    release(ctx, part, out);
  });

  it.runIf(ctx.info.features.shaderF16 && ctx.info.features.subgroups)('the kernel compiles for every tile and layout with subgroup-uniformity-checking stand-ins for the subgroup-matrix builtins', async () => {
    // Adapters without subgroup matrices cannot compile the real kernel, but Tint's uniformity analysis runs
    // everywhere: each stand-in demands subgroup-uniform arguments as the real builtins do (a subgroup op under
    // a branch on them), so a non-uniform offset, the bug that crashed pipeline creation on the H200 under
    // skip_validation, fails here (the second half checks that it does).
    const nv = tensorCorePlan(fakeInfo({ configs: NVIDIA })) as TensorCorePlan;
    const compileErrors = async (code: string, gscale = false) => {
      const def = tcKernelDef(code, 'f16', gscale, /const TAIL: bool = true/.test(code));
      const src = kernelSource({ name: 'matmul-tc-stub', ...def, enables: ['f16', 'subgroups'] });
      ctx.device.pushErrorScope('validation');
      const info = await ctx.device.createShaderModule({ code: src }).getCompilationInfo();
      await ctx.device.popErrorScope();
      return info.messages.filter((m) => m.type === 'error').map((m) => `${m.lineNum}:${m.linePos} ${m.message.split('\n')[0]}`);
    };
    const stub = (code: string) => {
      const out =
        code
          .replace(/alias (\w+) = subgroup_matrix_\w+<[^;]*;/g, 'alias $1 = f32;')
          .replace(/subgroupMatrixLoad<\w+, \w+>\(bufferView<array<f16>>\(&smem, (\w+)\),/g, 'stub_load_bv($1, ')
          .replace(/subgroupMatrixStore<row_major>\(bufferView<array<f32>>\(&smem, 0u\),/g, 'stub_store_bvf(')
          .replace(/subgroupMatrixLoad<\w+, \w+>\(&(\w+),/g, 'stub_load_$1(')
          .replace(/subgroupMatrixMultiplyAccumulate\(/g, 'stub_mma(')
          .replace(/subgroupMatrixStore<row_major>\(&(\w+),/g, 'stub_store_$1(') +
        `
var<private> stub_sink: f32;
fn stub_need(x: u32) { if (x == 0xffffffffu) { stub_sink = subgroupAdd(1.0); } }
fn stub_mma(a: f32, b: f32, c: f32) -> f32 { return a * b + c; }
fn stub_store_c(o: u32, v: f32, s: u32) { stub_need(o); stub_need(s); c[o] = v; }
` +
        // a split tail's chunks store their accumulators to binding part
        (/const TAIL: bool = true/.test(code) ? 'fn stub_store_part(o: u32, v: f32, s: u32) { stub_need(o); stub_need(s); part[o] = v; }\n' : '') +
        // the staged slices and the scratch: arrays, or views of one buffer (bv tiles; the base in bytes)
        (/var<workgroup> smem: buffer/.test(code)
          ? `
fn stub_load_bv(base: u32, off: u32, s: u32) -> f32 { stub_need(off); stub_need(s); return f32(bufferView<array<f16>>(&smem, 0u)[base / 2u + off]); }
fn stub_store_bvf(o: u32, v: f32, s: u32) { stub_need(o); stub_need(s); bufferView<array<f32>>(&smem, 0u)[o] = v; }
`
          : `
fn stub_load_As(off: u32, s: u32) -> f32 { stub_need(off); stub_need(s); return f32(As[off]); }
fn stub_load_Bs(off: u32, s: u32) -> f32 { stub_need(off); stub_need(s); return f32(Bs[off]); }
fn stub_store_Cs(o: u32, v: f32, s: u32) { stub_need(o); stub_need(s); Cs[o] = v; }
`) +
        // CM variants copy blocks from the f16 storage views into the staged slices
        (/\bah: array<f16>/.test(code)
          ? `
fn stub_load_ah(off: u32, s: u32) -> f32 { stub_need(off); stub_need(s); return f32(ah[off]); }
fn stub_load_bh(off: u32, s: u32) -> f32 { stub_need(off); stub_need(s); return f32(bh[off]); }
fn stub_store_As(o: u32, v: f32, s: u32) { stub_need(o); stub_need(s); As[o] = f16(v); }
fn stub_store_Bs(o: u32, v: f32, s: u32) { stub_need(o); stub_need(s); Bs[o] = f16(v); }
`
          : '');
      expect(out.replace(/\/\/.*$/gm, '')).not.toMatch(/subgroupMatrix\w*[<(]|subgroup_matrix_\w+</);
      return out;
    };
    const errors: string[] = [];
    for (const unroll of [false, true])
      for (const t of Object.values(TC_TILES))
        for (const [ta, tb] of [[false, false], [false, true], [true, false]] as const)
          for (const e of await compileErrors(stub(tcSource(nv, t, ta, tb, undefined, unroll))))
            errors.push(`${JSON.stringify(t)} ${ta}${tb}${unroll ? ' unrolled' : ''}: ${e}`);
    // the timing ablations of matmul-tc-bench --ablate (the stores of nostore behind a run-time condition)
    for (const ablate of ['nomma', 'nostage', 'nostore'] as const)
      for (const e of await compileErrors(stub(tcSource(nv, { ...TC_TILES[tcTuning.big], ablate }, false, true, undefined, true)))) errors.push(`${ablate}: ${e}`);
    // the epilogue that multiplies by the f16x3 split's factors (matmul-f16x3.ts), every layout
    const gs = { VEC_A: true, VEC_B: true, HAS_BIAS: true, ACCUM: true, DIRECT: false, GSCALE: true };
    for (const [ta, tb] of [[false, false], [false, true], [true, false], [true, true]] as const)
      for (const e of await compileErrors(stub(tcSource(nv, TC_TILES[tcTuning.big], ta, tb, gs)), true)) errors.push(`gscale ${ta}${tb}: ${e}`);
    // split tails (linear grid, K chunks, partial stores), array and unrolled forms, the tiles auto takes
    const tail = { VEC_A: true, VEC_B: true, HAS_BIAS: false, ACCUM: false, DIRECT: true, GSCALE: false, TAIL: true };
    for (const unroll of [false, true])
      for (const t of [tcTuning.big, tcTuning.bigTN, tcTuning.bigNT, tcTuning.small, 'v30'] as const)
        for (const [ta, tb] of [[false, false], [false, true], [true, false]] as const) {
          const src = tcSource(nv, TC_TILES[t], ta, tb, tail, unroll);
          expect(src).toMatch(/subgroupMatrixStore<row_major>\(&part, pb \+/);
          for (const e of await compileErrors(stub(src))) errors.push(`tail ${t} ${ta}${tb}${unroll ? ' unrolled' : ''}: ${e}`);
        }
    expect(errors).toEqual([]);
    // the subgroup index computed from local_invocation_index is not subgroup-uniform: rejected
    const bad = stub(tcSource(nv, TC_TILES.t64x64, false, false)).replace('@builtin(subgroup_id) sg: u32', '@builtin(subgroup_size) sgs_: u32')
      .replace('@builtin(subgroup_invocation_id) lane: u32) {\n', '@builtin(subgroup_invocation_id) lane: u32) {\n  let sg = lid / SG;\n');
    expect((await compileErrors(bad)).join('\n')).toMatch(/uniform/);
  });

  it('on this adapter: f16 x f16 runs the path matmulPath names and matches float64 (portable fallback where tensor cores are absent)', async () => {
    const path = matmulPath(ctx, 'f16', 'f16');
    expect(matmulPath(ctx, 'f32', 'f16').tc).toBeNull();
    expect(matmulPath(ctx, 'f16', 'f16', { variant: 'v1' }).tc).toBeNull();
    expect(matmulPath(ctx, 'f16', 'f16', { tensorCores: false }).tc).toBeNull();
    expect(matmulPath(ctx, 'f16', 'f16', {}, 16).tc).toBeNull(); // K below TC_MIN_K: portable (measured faster)
    if (!path.tc) expect(() => matmulPath(ctx, 'f16', 'f16', { tensorCores: true })).toThrow(ShapeError);
    const [M, N, K] = [37, 21, 45];
    const av = roundTo('f16', randn(M * K, 1));
    const bv = roundTo('f16', randn(N * K, 2));
    const A = upload(ctx, av, [M, K], 'f16');
    const B = upload(ctx, bv, [N, K], 'f16');
    const out = upload(ctx, new Float32Array(M * N), [M, N]);
    poison(ctx, out);
    matmul(ctx, A, B, { transB: true, out });
    const want = matmulRef(av, bv, { M, N, K, batch: 1, sa: 0, sb: 0, transB: true });
    expect(relErr(await download(ctx, out), want)).toBeLessThan(path.tc ? TC_TOL : 1e-5);
    release(ctx, A, B, out);
  });
});

// The tensor-core kernels themselves: only where the adapter has subgroup matrices (the GPU machine; run there
// through src/bench/matmul-tc-check.ts, which runs the same cases without vitest).
describe.runIf('frag' in tensorCorePlan(ctx.info))('tensor-core matmul (adapters with subgroup matrices)', () => {
  it('matches float64 of the f16-rounded inputs within 1e-3: NN, NT, TN, batched, odd sizes, epilogues, every tile', async () => {
    for (const c of tcCases(ctx)) {
      const r = await runTcCase(ctx, c);
      expect(r.relErr, r.name).toBeLessThan(r.tol ?? TC_TOL);
    }
  });

  it('creates a new subgroup-matrix pipeline after another has run and been read back, repeatedly', async () => {
    const rs = await pipelineSequence(ctx);
    expect(rs.length).toBeGreaterThan(1);
    for (const r of rs) expect(r.relErr, r.name).toBeLessThan(TC_TOL);
  });
});

describe('tensor-core pipelines are created only after their WGSL checked out (runs everywhere)', () => {
  // on adapters without subgroup matrices every tensor-core kernel fails its check: the path a shader error takes
  it.runIf(!('frag' in tensorCorePlan(ctx.info)))('a kernel that fails its check is reported, never built, and the product still runs on the portable path', async () => {
    // this adapter cannot compile subgroup-matrix WGSL at all (lavapipe): the same path a shader error takes
    // on a GPU, where building such a pipeline under skip_validation aborted the process
    const fake = tensorCorePlan(fakeInfo({ configs: NVIDIA })) as TensorCorePlan;
    const [M, N, K] = [20, 24, 16];
    const av = roundTo('f16', randn(M * K, 5));
    const bv = roundTo('f16', randn(K * N, 6));
    const A = upload(ctx, av, [M, K], 'f16');
    const B = upload(ctx, bv, [K, N], 'f16');
    const out = upload(ctx, new Float32Array(M * N), [M, N]);
    const launch = { M, N, K, batch: 1, sa: 0, sb: 0, lda: K, ldb: N, alpha: 1, transA: false, transB: false, biasDtype: 'f16' as const, hasBias: false, accumulate: false, tile: TC_TILES.t64x64 };
    const bufs = [A.buffer, B.buffer, A.buffer, out.buffer] as [typeof A.buffer, typeof A.buffer, typeof A.buffer, typeof A.buffer];
    expect(matmulTc(ctx, fake, launch, bufs)).toBe(false); // check started, nothing encoded
    await tensorCoresReady(ctx);
    const failures = tcFailures(ctx);
    expect(failures.size).toBe(1);
    expect([...failures.values()][0]!.message).toMatch(/failed to compile/);
    expect(matmulTc(ctx, fake, launch, bufs)).toBe(false); // never built
    // auto's big tile through buffer views, refused: the same product falls back to the tiles without them (here
    // v36 stands in for the big tile, within this adapter's workgroup memory; without buffer views the small
    // tile is the one that fits)
    const saved = tcTuning.big;
    tcTuning.big = 'v36';
    try {
      const big = { ...launch, M: 1024, N: 3072, K: 64, transB: true, tile: undefined };
      expect(chooseTcTile(fake, ctx.info.limits, big)).toBe(TC_TILES.v36);
      expect(matmulTc(ctx, fake, big, bufs)).toBe(false);
      await tensorCoresReady(ctx);
      expect(matmulTc(ctx, fake, big, bufs)).toBe(false);
      await tensorCoresReady(ctx);
    } finally {
      tcTuning.big = saved;
    }
    const nt = [...tcFailures(ctx).keys()].filter((k) => k.includes(':01:'));
    expect(nt.filter((k) => k.includes(tcTileKey(TC_TILES.v36)))).toHaveLength(1);
    expect(nt.filter((k) => k.includes(tcTileKey(TC_TILES.t64x64)))).toHaveLength(1);
    // the context is unharmed: a product runs and matches float64
    poison(ctx, out);
    matmul(ctx, A, B, { out });
    expect(relErr(await download(ctx, out), matmulRef(av, bv, { M, N, K, batch: 1, sa: 0, sb: 0 }))).toBeLessThan(1e-5);
    release(ctx, A, B, out);
  });
});
