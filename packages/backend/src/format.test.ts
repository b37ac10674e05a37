import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type Context } from './context';
import { decode, DTYPES, encode, FLOAT_DTYPES, isFloat, isHalf, storageBytes } from './dtype';
import { FORMAT_NAMES, FORMATS, formatFromSafetensors, formatFromTorch, formatOf } from './format';
import { wgslPacker } from './kernel';
import { empty, numel, poison, release, upload, uploadBytes } from './tensor';
import { randn } from './testing';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

/** Values every format represents exactly (integers for the integer formats). */
function sample(name: string, n: number): number[] {
  const f = formatOf(name);
  if (f.kind === 'int') return Array.from({ length: n }, (_, i) => (name === 'u32' ? i * 7919 : (i - (n >> 1)) * 7919));
  const r = randn(n, 3, 10);
  return Array.from(r, (x, i) => (i % 11 === 0 ? 0 : f.round!(x)));
}

describe('format table', () => {
  it('lists f32, f16, bf16, i32, u32 with their file names; the dtype helpers read the table', () => {
    expect(DTYPES).toEqual(FORMAT_NAMES);
    expect(FLOAT_DTYPES).toEqual(['f32', 'f16', 'bf16']);
    expect(FORMAT_NAMES.map((n) => formatOf(n).safetensors)).toEqual(['F32', 'F16', 'BF16', 'I32', 'U32']);
    for (const n of FORMAT_NAMES) {
      const f = formatOf(n);
      expect(f.name).toBe(n);
      if (f.safetensors) expect(formatFromSafetensors(f.safetensors)).toBe(n);
      if (f.torch) expect(formatFromTorch(f.torch)).toBe(n);
      expect(isFloat(n)).toBe(f.kind === 'float');
    }
    expect(formatFromTorch('torch.bfloat16')).toBe('bf16');
    expect(formatFromSafetensors('F64')).toBeUndefined();
    expect(formatFromTorch('float8_e4m3fn')).toBeUndefined();
    expect(isHalf('f16') && isHalf('bf16') && !isHalf('f32') && !isHalf('i32')).toBe(true);
    expect(() => formatOf('f8')).toThrow(/unknown storage format 'f8'/);
  });

  it('storage bytes are whole words: 16-bit formats pack two per word', () => {
    expect([1, 2, 3, 7].map((n) => storageBytes('f16', n))).toEqual([4, 4, 8, 16]);
    expect([1, 2, 3].map((n) => storageBytes('bf16', n))).toEqual([4, 4, 8]);
    expect([1, 3].map((n) => storageBytes('f32', n))).toEqual([4, 12]);
  });

  it('host encode / decode round-trip every format exactly (odd lengths) and round to nearest even', () => {
    for (const n of FORMAT_NAMES) {
      const v = sample(n, 37);
      const bytes = encode(n, v);
      expect(bytes.byteLength).toBe(storageBytes(n, v.length));
      expect(Array.from(decode(n, bytes.buffer as ArrayBuffer, v.length))).toEqual(v);
    }
    // a tie between two f16 values rounds to the even one; bf16 keeps f32's exponent range
    expect(FORMATS.f16.round!(1 + 2 ** -11)).toBe(1);
    expect(FORMATS.f16.round!(1 + 3 * 2 ** -11)).toBe(1 + 2 ** -9);
    expect(FORMATS.f16.round!(70000)).toBe(Infinity);
    expect(FORMATS.bf16.round!(1e30)).toBeCloseTo(1e30, -27);
  });

  it("the kernels' generated readers (read_<name>) decode every format as the host does", async () => {
    for (const n of FORMAT_NAMES) {
      const f = formatOf(n);
      const v = sample(n, 37);
      const x = upload(ctx, v, [v.length], n);
      const y = empty(ctx, [v.length], n === 'f32' || f.kind === 'float' ? 'f32' : n);
      poison(ctx, y);
      const k = ctx.kernel({
        name: `format-read-${n}`,
        code: `@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3u) {
  if (g.x < p.n) { y[g.x] = read_x(g.x); }
}`,
        bindings: [
          { name: 'x', access: 'read', dtype: n },
          { name: 'y', access: 'rw', dtype: y.dtype },
        ],
        params: ['u32:n'],
      });
      ctx.dispatch(k, [x.buffer, y.buffer], Math.ceil(v.length / 64), [v.length]);
      const got = decode(y.dtype, await ctx.read(y.buffer, storageBytes(y.dtype, v.length)), v.length);
      expect([n, Array.from(got)]).toEqual([n, v]);
      release(ctx, x, y);
    }
  });

  it('kernels write every float format through wgslPacker exactly as the host encodes it (odd length)', async () => {
    const v = Array.from(randn(41, 5, 3));
    for (const n of FLOAT_DTYPES) {
      const x = upload(ctx, v, [v.length], 'f32');
      const y = empty(ctx, [v.length], n);
      poison(ctx, y, 0xdeadbeef);
      const k = ctx.kernel({
        name: `format-pack-${n}`,
        code:
          wgslPacker('y', n) +
          `@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3u) {
  let i = g.x * PW_y;
  if (i >= p.n) { return; }
  var v: array<f32, PW_y>;
  for (var j = 0u; j < PW_y; j++) { if (i + j < p.n) { v[j] = read_x(i + j); } }
  y[g.x] = pack_y(v);
}`,
        bindings: [
          { name: 'x', access: 'read', dtype: 'f32' },
          { name: 'y', access: 'rw', dtype: 'u32' },
        ],
        params: ['u32:n'],
      });
      ctx.dispatch(k, [x.buffer, y.buffer], Math.ceil(v.length / 64), [v.length]);
      const got = new Uint8Array(await ctx.read(y.buffer, storageBytes(n, v.length)));
      expect([n, Array.from(got)]).toEqual([n, Array.from(encode(n, Float32Array.from(v)))]);
      release(ctx, x, y);
    }
    expect(() => wgslPacker('y', 'i32')).toThrow(/do not write i32/);
  });

  it('raw bytes upload as stored (a safetensors F16 stream is the f16 layout)', async () => {
    const bits = Uint16Array.of(0x3c00, 0xc000, 0x7bff);
    const t = uploadBytes(ctx, bits, [3], 'f16');
    const back = decode('f16', await ctx.read(t.buffer, storageBytes('f16', numel(t.shape))), 3);
    expect(Array.from(back)).toEqual([1, -2, 65504]);
    release(ctx, t);
  });
});
