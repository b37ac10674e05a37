import { afterAll, describe, expect, it } from 'vitest';
import { createContext, type Context, type ContextInfo } from '../../context';
import { ConfigError, ShapeError } from '../../errors';
import { kernelSource } from '../../kernel';
import { upload, release } from '../../tensor';
import { randn } from '../../testing';
import type { TensorCorePlan } from '../core/matmul-tc';
import { ATTENTION_DS_BUDGET, flashAttention, flashAttentionBackward, flashAttentionTcPath } from './flash';
import { runTcAttnCase, TC_ATTN_TOL, tcAttnCases } from './flash-tc.cases';
import { attentionTcPlan, chooseTcAttnTiles, tcAttnBytes, tcAttnCode, tcAttnDef, tcAttnDsBytes, tcAttnPathFor, tcAttnTileProblem, type TcAttnKind } from './flash-tc';

const ctx: Context = await createContext();
afterAll(() => ctx.destroy());

type Info = Pick<ContextInfo, 'features' | 'subgroupMatrixConfigs' | 'subgroupSizes' | 'limits'>;
const f16f32 = (M: number, N: number, K: number) => ({ M, N, K, componentType: 'f16', resultComponentType: 'f32' });
const H200_LIMITS = { maxComputeInvocationsPerWorkgroup: 1024, maxComputeWorkgroupStorageSize: 49152 };
function fakeInfo(o: Partial<{ sm: boolean; f16: boolean; configs: Info['subgroupMatrixConfigs']; sizes: [number, number]; limits: Record<string, number> }>): Info {
  return {
    features: { shaderF16: o.f16 ?? true, subgroups: true, timestampQuery: true, subgroupMatrix: o.sm ?? true },
    subgroupMatrixConfigs: o.configs ?? [],
    subgroupSizes: { min: o.sizes?.[0] ?? 32, max: o.sizes?.[1] ?? 32 },
    limits: o.limits ?? H200_LIMITS,
  } as Info;
}
const NVIDIA = [f16f32(16, 8, 16), f16f32(16, 16, 16), { ...f16f32(16, 16, 16), resultComponentType: 'f16' }];
const KINDS: TcAttnKind[] = ['fwd', 'dq', 'dkdv', 'dqds'];

describe('tensor-core attention path selection (runs everywhere)', () => {
  it('takes the fragment from the adapter and fits tiles to its workgroup memory at D = 64 and 128', () => {
    const nv = tcAttnPathFor(fakeInfo({ configs: NVIDIA }), 64);
    if (!('plan' in nv)) throw new Error(nv.reason);
    expect(nv.plan.frag).toMatchObject({ M: 16, N: 16, K: 16 });
    expect(nv.tiles).toEqual({ fwd: { nsg: 4, b: 64 }, dq: { nsg: 4, b: 64 }, dkdv: { nsg: 4, b: 64 }, dqds: { nsg: 4, b: 64 } });
    const d128 = tcAttnPathFor(fakeInfo({ configs: NVIDIA }), 128);
    if (!('plan' in d128)) throw new Error(d128.reason);
    for (const k of KINDS) {
      expect(tcAttnBytes(k, d128.plan, 128, d128.tiles[k])).toBeLessThanOrEqual(49152);
      expect(tcAttnTileProblem(k, d128.plan, H200_LIMITS, 128, { nsg: 4, b: 64 })).toMatch(/workgroup memory/);
    }
    // Apple-like 8x8x8 with 32-wide subgroups: 4 threads per row
    const apple = tcAttnPathFor(fakeInfo({ configs: [f16f32(8, 8, 8)] }), 64);
    if (!('plan' in apple)) throw new Error(apple.reason);
    expect(apple.plan.frag).toMatchObject({ M: 8, N: 8, K: 8 });
    const c = tcAttnCode('fwd', apple.plan, 64, apple.tiles.fwd);
    expect(c).toContain('alias Lm = subgroup_matrix_left<f16, 8, 8>;');
    expect(c).toContain('const TPR: u32 = 4u;');
    expect(c).toContain('const LTPR: u32 = 2u;');
    // a 16x8x16-only adapter: result matrices 16 x 8
    const n8 = tcAttnPathFor(fakeInfo({ configs: [f16f32(16, 8, 16)] }), 64);
    if (!('plan' in n8)) throw new Error(n8.reason);
    const src = tcAttnCode('dkdv', n8.plan, 64, n8.tiles.dkdv);
    expect(src).toContain('alias Rm = subgroup_matrix_right<f16, 8, 16>;');
    expect(src).toContain('alias Acc = subgroup_matrix_result<f32, 8, 16>;');
    expect(src).toMatch(/subgroupMatrixLoad<Rm, col_major>\(&Qs, off, QSTR\)/);
    expect(src).toContain('const NDN: u32 = 8u;');
  });

  it('falls back with a reason: no subgroup matrices, no f16 -> f32 config, a subgroup size that is no multiple of M, too little memory', () => {
    expect(tcAttnPathFor(fakeInfo({ sm: false, configs: NVIDIA }), 64)).toEqual({ reason: expect.stringMatching(/subgroup-matrix/) });
    expect(tcAttnPathFor(fakeInfo({ configs: [NVIDIA[2]!] }), 64)).toEqual({ reason: expect.stringMatching(/f16 -> f32/) });
    expect(tcAttnPathFor(fakeInfo({ configs: NVIDIA, sizes: [16, 32] }), 64)).toEqual({ reason: expect.stringMatching(/not fixed/) });
    expect(attentionTcPlan(fakeInfo({ configs: NVIDIA, sizes: [8, 8] }))).toEqual({ reason: expect.stringMatching(/multiple of the fragment's M/) });
    expect(attentionTcPlan(fakeInfo({ configs: [f16f32(16, 16, 16)], sizes: [48, 48] }))).toEqual({ reason: expect.stringMatching(/power-of-two/) });
    expect(tcAttnPathFor(fakeInfo({ configs: NVIDIA, limits: { ...H200_LIMITS, maxComputeWorkgroupStorageSize: 8192 } }), 256)).toEqual({ reason: expect.stringMatching(/no tensor-core fwd tile/) });
    const plan = attentionTcPlan(fakeInfo({ configs: NVIDIA })) as TensorCorePlan;
    expect(tcAttnTileProblem('fwd', plan, H200_LIMITS, 64, { nsg: 4, b: 24 })).toMatch(/multiple of 16/);
    expect(tcAttnTileProblem('fwd', plan, { ...H200_LIMITS, maxComputeInvocationsPerWorkgroup: 64 }, 64, { nsg: 4, b: 32 })).toMatch(/threads/);
    expect(chooseTcAttnTiles(plan, { ...H200_LIMITS, maxComputeWorkgroupStorageSize: 32768 }, 64)).toEqual({
      fwd: { nsg: 2, b: 64 },
      dq: { nsg: 2, b: 64 },
      dkdv: { nsg: 2, b: 64 },
      dqds: { nsg: 4, b: 32 },
    });
  });

  it('on this adapter: f16 inputs take the path the adapter has, f32 and bf16 never, tensorCores: true says why not', () => {
    const f16 = upload(ctx, randn(2 * 4 * 16, 1), [1, 2, 4, 16], 'f16');
    const f32 = upload(ctx, randn(2 * 4 * 16, 1), [1, 2, 4, 16]);
    const bf = upload(ctx, randn(2 * 4 * 16, 1), [1, 2, 4, 16], 'bf16');
    const has = 'frag' in attentionTcPlan(ctx.info);
    expect(flashAttentionTcPath(ctx, f16, f16, f16) !== null).toBe(has);
    expect(flashAttentionTcPath(ctx, f16, f16, f16, { tensorCores: false })).toBeNull();
    expect(flashAttentionTcPath(ctx, f32, f32, f32)).toBeNull();
    expect(flashAttentionTcPath(ctx, f16, bf, f16)).toBeNull();
    expect(() => flashAttention(ctx, f32, f32, f32, { tensorCores: true })).toThrow(/tensorCores: true, but q, k and v must be f16/);
    expect(() => flashAttention(ctx, f16, f16, f16, { tensorCores: 'yes' as unknown as boolean })).toThrow(ConfigError);
    if (!has) expect(() => flashAttention(ctx, f16, f16, f16, { tensorCores: true })).toThrow(ShapeError);
    release(ctx, f16, f32, bf);
  });

  it('the backward stores dS (f16, T rounded up to 8) only within dsBudget; a bad budget is a ConfigError', () => {
    expect(tcAttnDsBytes({ B: 8, T: 1024, S: 1024, Hq: 12 })).toBe(192 * 2 ** 20);
    expect(tcAttnDsBytes({ B: 1, T: 13, S: 5, Hq: 2 })).toBe(2 * 5 * 16 * 2);
    expect(ATTENTION_DS_BUDGET).toBe(256 * 2 ** 20);
    const x = upload(ctx, randn(2 * 4 * 16, 1), [1, 2, 4, 16], 'f16');
    const f = flashAttention(ctx, x, x, x);
    for (const dsBudget of [-1, NaN, '1' as unknown as number])
      expect(() => flashAttentionBackward(ctx, x, x, x, x, f.out, f.lse, { dsBudget })).toThrow(ConfigError);
    release(ctx, x, f.out, f.lse);
  });
});

// The kernels' WGSL on adapters without subgroup matrices, the builtins replaced by plain-array stand-ins
// (emulatedOps in flash-tc.ts), among them fragments of this adapter's subgroup size (two threads per row with
// M = SG / 2: the row reductions by subgroup shuffles).
const SG = ctx.info.subgroupSizes.max;
const emulatable = ctx.info.features.shaderF16 && ctx.info.features.subgroups && ctx.info.subgroupSizes.min === SG && SG >= 4 && !('frag' in attentionTcPlan(ctx.info));
const EMU_FRAGS = [f16f32(SG, SG, SG), f16f32(SG / 2, SG, 2 * SG)];

describe.runIf(emulatable)('tensor-core attention kernels, subgroup matrices emulated (CPU machines)', () => {
  it('every kernel compiles for NVIDIA, Apple-like and 16x8x16 fragments and odd head dims, with subgroup-uniformity-checking stand-ins; a subgroup index from local_invocation_index is rejected', async () => {
    // Adapters without subgroup matrices cannot compile the real kernels, but Tint's uniformity analysis runs
    // everywhere: the emulated loads and stores demand subgroup-uniform offsets as the real builtins do, so a
    // non-uniform operand (which aborted pipeline creation under skip_validation on the H200, see matmul-tc)
    // fails here. Only the WGSL is checked (no pipeline: LLVM on lavapipe takes minutes on these).
    const errors = async (def: ReturnType<typeof tcAttnDef>) => {
      ctx.device.pushErrorScope('validation');
      const info = await ctx.device.createShaderModule({ code: kernelSource(def) }).getCompilationInfo();
      await ctx.device.popErrorScope();
      return info.messages.filter((m) => m.type === 'error').map((m) => `${def.name} ${m.lineNum}: ${m.message.split('\n')[0]}`);
    };
    const found: string[] = [];
    const plans: TensorCorePlan[] = [
      { frag: f16f32(16, 16, 16), subgroupSize: 32 },
      { frag: f16f32(16, 8, 16), subgroupSize: 32 },
      { frag: f16f32(8, 8, 8), subgroupSize: 32 },
      { frag: EMU_FRAGS[1]!, subgroupSize: SG },
    ];
    for (const plan of plans)
      for (const D of [64, 13, 128]) {
        const tiles = chooseTcAttnTiles(plan, H200_LIMITS, D);
        if ('reason' in tiles) throw new Error(tiles.reason);
        for (const kind of KINDS)
          for (const dout of kind === 'fwd' || kind === 'dqds' ? (['f16'] as const) : (['f16', 'f32'] as const))
            for (const out of kind === 'dq' ? (['f32', 'f16'] as const) : (['f32'] as const))
              for (const wds of kind === 'dkdv' ? [false, true] : [false])
                found.push(...(await errors(tcAttnDef(kind, plan, D, tiles[kind], 'i32', dout, true, out, wds))));
      }
    expect(found).toEqual([]);
    const plan = { frag: EMU_FRAGS[0]!, subgroupSize: SG };
    for (const kind of KINDS) {
      const def = tcAttnDef(kind, plan, 16, { nsg: 2, b: 2 * SG }, 'u32', 'f16', true);
      const bad = def.code.replace('@builtin(subgroup_id) sg: u32', '@builtin(subgroup_size) sgs_: u32').replace('let vt = sg * SG + lane;', 'let sg = lid / SG;\n  let vt = sg * SG + lane;');
      expect(bad).not.toBe(def.code);
      expect((await errors({ ...def, code: bad })).join('\n')).toMatch(/uniform/);
    }
  });
});

// The real kernels: only where the adapter has subgroup matrices (the GPU machine; run there through
// src/bench/attention-tc-check.ts, which runs the same cases without vitest).
describe.runIf('frag' in attentionTcPlan(ctx.info))('tensor-core attention (adapters with subgroup matrices)', () => {
  it('forward and backward match float64 of the f16-rounded inputs within 1e-3', async () => {
    for (const c of tcAttnCases()) {
      const r = await runTcAttnCase(ctx, c);
      for (const [k, e] of Object.entries(r.err)) expect(e, `${r.name} ${k}`).toBeLessThan(TC_ATTN_TOL);
    }
  });
});
