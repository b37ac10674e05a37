// `rusty devices`' compute paths: on this machine's adapter (lavapipe: no subgroup matrices, everything portable),
// and on adapters described by their info alone (an H200's subgroup-matrix configurations through Vulkan, Apple's
// 8x8x8, one without shader-f16), through the backend's own selection functions (matmul and attention).
import { createContext, TC_TILES, tcTuning, type Context, type ContextInfo } from '@rusty/backend';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { computePathLines, computePaths } from './compute-paths';
import { main } from './main';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());
afterEach(() => vi.restoreAllMocks());

/** A context stand-in with an adapter's info (the selection functions read only `ctx.info`). */
function withInfo(info: Partial<ContextInfo>): Context {
  return { info: { ...ctx.info, isSoftware: false, ...info } } as unknown as Context;
}

const cfg = (M: number, N: number, K: number, componentType = 'f16', resultComponentType = 'f32') => ({ M, N, K, componentType, resultComponentType });

describe('compute paths', () => {
  it('this adapter (lavapipe: no subgroup matrices): every matmul and attention portable, with the reason', () => {
    const p = computePaths(ctx);
    const tc = ctx.info.features.subgroupMatrix && ctx.info.features.shaderF16;
    expect(p.matmul.f16.path).toBe(tc ? 'tensor-cores' : 'portable');
    for (const d of ['bf16', 'f32'] as const) expect(p.matmul[d].path).toBe('portable');
    expect(p.f32High.path).toBe(tc ? 'tensor-cores' : 'portable');
    expect(p.f32Frozen.path).toBe(tc ? 'tensor-cores' : 'portable');
    if (!ctx.info.features.subgroupMatrix) expect(p.matmul.f16.reason).toMatch(/no chromium-experimental-subgroup-matrix/);
    else expect(p.matmul.f16.detail).toMatch(/^subgroup matrices \d+x\d+x\d+ f16 -> f32/);
    expect(p.matmul.bf16.reason).toMatch(/operands are bf16 x bf16, tensor cores take f16 x f16/);
    expect(p.matmul.bf16.detail).toMatch(/bf16 operands unpacked to f32/);
    expect(Object.keys(p.attention)).toEqual(['D=64', 'D=128']);
    for (const D of ['D=64', 'D=128']) {
      expect(p.attention[D]!.path).toBe(tc ? 'tensor-cores' : 'portable');
      expect(p.attention[D]!.detail).toMatch(/^flash attention.*tiles fwd \d+x\d+(x\d+)?, dK\/dV \d+x\d+(x\d+)?, dQ \d+x\d+(x\d+)?$/);
      if (!ctx.info.features.subgroupMatrix) expect(p.attention[D]!.reason).toMatch(/no chromium-experimental-subgroup-matrix/);
    }
    expect(p.quantized.path).toBe(tc && !ctx.info.isSoftware ? 'tensor-cores' : 'portable');
    if (p.quantized.path === 'portable') expect(p.quantized.detail).toBe('1-16 rows: the decode GEMV; more: W dequantized in the kernel, f32 arithmetic');
  });

  it('an H200 through Vulkan: f16 x f16 on tensor cores with the largest f16 -> f32 fragment and the tiles auto runs', async () => {
    const h200 = withInfo({
      features: { shaderF16: true, subgroups: true, timestampQuery: true, subgroupMatrix: true },
      subgroupMatrixConfigs: [cfg(16, 8, 16), cfg(16, 16, 16, 'f16', 'f16'), cfg(16, 16, 16), cfg(16, 16, 32, 'i8', 'i32')],
      subgroupSizes: { min: 32, max: 32 },
      limits: { ...ctx.info.limits, maxComputeWorkgroupStorageSize: 49152, maxComputeInvocationsPerWorkgroup: 1024, maxComputeWorkgroupSizeX: 1024 },
    });
    const p = computePaths(h200);
    expect(p.matmul.f16.path).toBe('tensor-cores');
    const big = TC_TILES[tcTuning.big];
    expect(p.matmul.f16.detail).toContain(`subgroup matrices 16x16x16 f16 -> f32, subgroup size 32; tiles ${big.bm}x${big.bn}x${big.bk} (2048 x 5632)`);
    // x W^T: the big tile where the compute units are not known, the NT tile with an H200's 132 (4 waves against 3)
    const { units, viaTN: via } = tcTuning;
    try {
      tcTuning.units = null;
      expect(computePaths(h200).matmul.f16.detail).toContain(`; x W^T ${big.bm}x${big.bn}x${big.bk} (2048 x 5632, compute units unknown)`);
      tcTuning.units = 132;
      const nt = TC_TILES[tcTuning.bigNT];
      expect(computePaths(h200).matmul.f16.detail).toContain(`; x W^T ${nt.bm}x${nt.bn}x${nt.bk} (2048 x 5632, waves of 132 tiles); 4096^3 x W^T as the TN product of both operands transposed`);
      // the TN route only by the wave model (off: not shown)
      tcTuning.viaTN = null;
      expect(computePaths(h200).matmul.f16.detail).not.toContain('TN product');
      tcTuning.viaTN = via;
      tcTuning.units = null;
      expect(computePaths(h200).matmul.f16.detail).not.toContain('TN product');
    } finally {
      Object.assign(tcTuning, { units, viaTN: via });
    }
    expect(p.matmul.bf16).toMatchObject({ path: 'portable', reason: expect.stringMatching(/bf16 x bf16/) });
    expect(p.matmul.f32).toMatchObject({ path: 'portable', reason: expect.stringMatching(/f32 x f32/) });
    expect(p.f32High).toMatchObject({ path: 'tensor-cores', detail: expect.stringMatching(/^three f16 products per f32 product over 3K \(about 22 bits\), subgroup matrices 16x16x16/) });
    expect(p.f32Frozen).toMatchObject({ path: 'tensor-cores', detail: expect.stringMatching(/^A as three f16 planes \(two at high\) times the weight's exact f16 image, subgroup matrices 16x16x16/) });
    for (const D of ['D=64', 'D=128'])
      expect(p.attention[D]!).toMatchObject({ path: 'tensor-cores', detail: expect.stringMatching(/^flash attention, Q K\^T and P V on subgroup matrices 16x16x16 f16 -> f32, softmax in f32; tiles fwd \d+x\d+, dK\/dV \d+x\d+, dQ \d+x\d+ \(from stored dS \d+x\d+\)$/) });
    expect(p.quantized).toMatchObject({ path: 'tensor-cores', detail: expect.stringMatching(/^5-256 rows: W's tiles dequantized to f16 in workgroup memory, subgroup matrices 16x16x16 f16 -> f32; fewer rows: the subgroup GEMV/) });
    const lines = computePathLines(p);
    expect(lines[1]).toMatch(/^ {2}matmul f16 x f16 +tensor cores: subgroup matrices 16x16x16/);
    expect(lines[lines.length - 1]).toMatch(/^ {2}quantized weights +tensor cores: 5-256 rows/);
    // Apple through Metal offers 8x8x8: never a hard-coded fragment
    const apple = withInfo({ ...h200.info, subgroupMatrixConfigs: [cfg(8, 8, 8, 'f16', 'f32')] });
    expect(computePaths(apple).matmul.f16.detail).toMatch(/subgroup matrices 8x8x8 f16 -> f32/);
    // subgroup matrices without shader-f16: portable, and says why
    const noF16 = withInfo({ ...h200.info, features: { ...h200.info.features, shaderF16: false } });
    expect(computePaths(noF16).matmul.f16).toMatchObject({ path: 'portable', reason: 'the adapter has no shader-f16' });
    expect(computePaths(noF16).f32Frozen).toMatchObject({ path: 'portable', reason: 'the adapter has no shader-f16' });
    expect(computePaths(noF16).attention['D=64']).toMatchObject({ path: 'portable', reason: 'the adapter has no shader-f16' });
    expect(computePaths(noF16).quantized).toMatchObject({ path: 'portable', reason: 'the adapter has no shader-f16' });
  });

  it('rusty devices prints the paths, and --json has them', async () => {
    const out: string[] = [];
    vi.spyOn(console, 'log').mockImplementation((...a) => void out.push(a.join(' ') + '\n'));
    expect(await main(['devices'])).toBe(0);
    const text = out.join('');
    expect(text).toMatch(/^compute paths$/m);
    expect(text).toMatch(/^ {2}matmul f16 x f16 +(tensor cores|portable): /m);
    expect(text).toMatch(/^ {2}attention f16 D=128 +(tensor cores|portable): flash attention/m);
    out.length = 0;
    expect(await main(['devices', '--json'])).toBe(0);
    const j = JSON.parse(out.join(''));
    expect(j.paths).toEqual(computePaths(ctx));
  });
});
