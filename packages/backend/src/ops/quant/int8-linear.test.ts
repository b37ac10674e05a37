// The int8 x int8 path: row quantization, the portable and tensor-core products against float64 of the same
// int8 values, the tensor-core kernel's WGSL compiled with subgroup-uniformity-checking stand-ins on any adapter.
import { afterAll, describe, expect, it } from 'vitest';
import { createContext, type Context, type ContextInfo } from '../../context';
import { ConfigError, ShapeError } from '../../errors';
import { kernelSource } from '../../kernel';
import { download, empty, poison, release, upload } from '../../tensor';
import { randn, relErr } from '../../testing';
import { quantSpec } from './formats';
import { i8Cases, i8Codes, quantizeRowsRef, runI8Case } from './int8-linear.cases';
import { contextI8Plan, I8_TILES, i8TcKernelDef, i8TcSource, i8TileProblem, int8Linear, int8Matmul, int8TcPlan, quantizeRowsI8 } from './int8-linear';
import { quantize, releaseQuant } from './quantize';

const ctx: Context = await createContext();
afterAll(() => ctx.destroy());

type PlanInfo = Pick<ContextInfo, 'features' | 'subgroupMatrixConfigs' | 'subgroupSizes'>;
const cfg = (M: number, N: number, K: number, c: string, r: string) => ({ M, N, K, componentType: c, resultComponentType: r });
const H200: PlanInfo = {
  features: { shaderF16: true, subgroups: true, timestampQuery: true, subgroupMatrix: true },
  subgroupMatrixConfigs: [cfg(16, 16, 16, 'f16', 'f32'), cfg(16, 8, 32, 'i8', 'i32'), cfg(16, 16, 32, 'i8', 'i32'), cfg(16, 16, 32, 'u8', 'u32')],
  subgroupSizes: { min: 32, max: 32 },
};
const LIMITS = { maxComputeInvocationsPerWorkgroup: 1024, maxComputeWorkgroupStorageSize: 49152 };

describe('int8 row quantization', () => {
  it('matches the host: scales to f32 division rounding, codes except on rounding boundaries; zero rows and padding', async () => {
    const [M, K] = [6, 203];
    const x = Float64Array.from(Float32Array.from(randn(M * K, 4)));
    for (let k = 0; k < K; k++) x[2 * K + k] = 0; // a zero row
    const xt = upload(ctx, x, [M, K]);
    const out = { codes: empty(ctx, [M, Math.ceil(K / 4)], 'u32'), scales: empty(ctx, [M]) };
    poison(ctx, out.codes);
    poison(ctx, out.scales);
    const a = quantizeRowsI8(ctx, xt, out);
    const ref = quantizeRowsRef(x, M, K);
    expect(relErr(await download(ctx, a.scales), ref.scales)).toBeLessThan(1e-6);
    const words = (await download(ctx, a.codes)) as Uint32Array;
    const got = i8Codes(words, M, Math.ceil(K / 4), K);
    let diff = 0;
    for (let i = 0; i < got.length; i++) {
      expect(Math.abs(got[i]! - ref.codes[i]!)).toBeLessThanOrEqual(1);
      if (got[i] !== ref.codes[i]) diff++;
    }
    expect(diff).toBeLessThanOrEqual(3);
    // the padding bytes of each row's last word are 0
    const bytes = new Int8Array(words.buffer, 0, M * Math.ceil(K / 4) * 4);
    for (let m = 0; m < M; m++) expect(bytes[m * 204 + 203]).toBe(0);
    release(ctx, xt, a.codes, a.scales);
  });
});

describe('int8 x int8 products', () => {
  for (const c of i8Cases(ctx))
    it(`${c.path} ${c.M}x${c.N}x${c.K}${c.bias ? ' bias' : ''}${c.tile ? ' ' + c.tile : ''}: float64 of the same int8 values, then the scales, within f32 rounding`, async () => {
      const r = await runI8Case(ctx, c);
      expect(r.worst).toBeLessThanOrEqual(1);
      expect(r.kernel).toMatch(c.path === 'tc' ? /-tc-/ : /^quant-i8-matmul$/);
    });

  it('int8Linear: x [2, 3, K] end to end within int8 quantization error of x W^T; the path is chosen by itself', async () => {
    const [N, K] = [20, 96];
    const w = randn(N * K, 2, 0.05);
    const q = quantize(ctx, upload(ctx, w, [N, K]), quantSpec('int8', 0));
    const x = randn(6 * K, 3);
    const y = int8Linear(ctx, upload(ctx, x, [2, 3, K], 'bf16'), q);
    expect(y.shape).toEqual([2, 3, N]);
    const xr = await download(ctx, upload(ctx, x, [6, K], 'bf16'));
    const want = new Float64Array(6 * N);
    for (let m = 0; m < 6; m++) for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) want[m * N + n]! += xr[m * K + k]! * w[n * K + k]!;
    expect(relErr(await download(ctx, y), want)).toBeLessThan(2e-2);
    releaseQuant(ctx, q);
  });

  it('refuses other weight formats, mismatched shapes, and tc where there are no int8 tensor cores', () => {
    const x = upload(ctx, randn(2 * 64, 1), [2, 64]);
    const q4 = quantize(ctx, upload(ctx, randn(8 * 64, 1), [8, 64]), quantSpec('int4', 64));
    expect(() => int8Linear(ctx, x, q4)).toThrow(ConfigError);
    const q8b = quantize(ctx, upload(ctx, randn(8 * 64, 1), [8, 64]), quantSpec('int8', 32));
    expect(() => int8Linear(ctx, x, q8b)).toThrow(/groupSize 0/);
    const q8 = quantize(ctx, upload(ctx, randn(8 * 32, 1), [8, 32]), quantSpec('int8', 0));
    expect(() => int8Linear(ctx, x, q8)).toThrow(/in_features 32/);
    expect(() => int8Matmul(ctx, quantizeRowsI8(ctx, x), q8)).toThrow(ShapeError);
    if (!('frag' in contextI8Plan(ctx))) {
      const q = quantize(ctx, upload(ctx, randn(8 * 64, 1), [8, 64]), quantSpec('int8', 0));
      expect(() => int8Linear(ctx, x, q, { path: 'tc' })).toThrow(/no int8 tensor cores/);
    }
  });
});

describe('int8 tensor-core plan and kernel (runs everywhere)', () => {
  it('takes the i8 -> i32 fragment the adapter reports, or says why not', () => {
    const p = int8TcPlan(H200);
    expect('frag' in p && p.frag).toMatchObject({ M: 16, N: 16, K: 32 });
    expect(int8TcPlan({ ...H200, subgroupMatrixConfigs: [cfg(16, 16, 16, 'f16', 'f32')] })).toEqual({ reason: expect.stringMatching(/i8 -> i32/) });
    expect(int8TcPlan({ ...H200, features: { ...H200.features, subgroupMatrix: false } })).toEqual({ reason: expect.stringMatching(/subgroup-matrix/) });
    expect(int8TcPlan({ ...H200, subgroupSizes: { min: 16, max: 32 } })).toEqual({ reason: expect.stringMatching(/not fixed/) });
    const plan = p as Exclude<typeof p, { reason: string }>;
    for (const t of Object.values(I8_TILES)) expect(i8TileProblem(t, plan, LIMITS)).toBeNull();
    expect(i8TileProblem({ bm: 64, bn: 64, bk: 48, sgm: 2, sgn: 2 }, plan, LIMITS)).toMatch(/BK 48/);
    expect(i8TileProblem(I8_TILES.t128x256k32, plan, { ...LIMITS, maxComputeWorkgroupStorageSize: 16384 })).toMatch(/workgroup memory/);
  });

  it.runIf(ctx.info.features.subgroups)('compiles for every tile with subgroup-uniformity-checking stand-ins for the subgroup-matrix builtins', async () => {
    const plan = int8TcPlan(H200) as Exclude<ReturnType<typeof int8TcPlan>, { reason: string }>;
    const stub = (code: string) =>
      code
        .replace(/alias (\w+) = subgroup_matrix_\w+<[^;]*;/g, 'alias $1 = i32;')
        .replace(/subgroupMatrixLoad<\w+, \w+>\(&(\w+),/g, 'stub_load_$1(')
        .replace(/subgroupMatrixMultiplyAccumulate\(/g, 'stub_mma(')
        .replace(/subgroupMatrixStore<row_major>\(&(\w+),/g, 'stub_store_$1(') +
      `
var<private> stub_sink: f32;
fn stub_need(x: u32) { if (x == 0xffffffffu) { stub_sink = subgroupAdd(1.0); } }
fn stub_load_As(off: u32, s: u32) -> i32 { stub_need(off); stub_need(s); return As[off / 4u]; }
fn stub_load_Bs(off: u32, s: u32) -> i32 { stub_need(off); stub_need(s); return Bs[off / 4u]; }
fn stub_mma(a: i32, b: i32, c: i32) -> i32 { return a * b + c; }
fn stub_store_Cs(o: u32, v: i32, s: u32) { stub_need(o); stub_need(s); Cs[o] = v; }
`;
    const errorsOf = async (code: string) => {
      const src = kernelSource({ name: 'i8-tc-stub', ...i8TcKernelDef(code), enables: ['subgroups'] });
      expect(src).not.toMatch(/subgroupMatrix\w*[<(]|subgroup_matrix_\w+</);
      ctx.device.pushErrorScope('validation');
      const info = await ctx.device.createShaderModule({ code: src }).getCompilationInfo();
      await ctx.device.popErrorScope();
      return info.messages.filter((m) => m.type === 'error').map((m) => `${m.lineNum}:${m.linePos} ${m.message.split('\n')[0]}`);
    };
    const errors: string[] = [];
    for (const t of Object.values(I8_TILES))
      for (const vec of [false, true])
        for (const bias of [false, true]) for (const e of await errorsOf(stub(i8TcSource(plan, t, vec, bias)))) errors.push(`${JSON.stringify(t)} vec ${vec} bias ${bias}: ${e}`);
    expect(errors).toEqual([]);
    // a subgroup index from local_invocation_index is not subgroup-uniform: rejected
    const bad = stub(i8TcSource(plan, I8_TILES.t64x64k64, true, false))
      .replace('@builtin(subgroup_id) sg: u32', '@builtin(subgroup_size) sgs_: u32')
      .replace('@builtin(subgroup_invocation_id) lane: u32) {\n', '@builtin(subgroup_invocation_id) lane: u32) {\n  let sg = lid / SG;\n');
    expect((await errorsOf(bad)).join('\n')).toMatch(/uniform/);
  });
});
