import { readFileSync, writeFileSync, mkdirSync, readdirSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { bf16BitsToF32, f16BitsToF32, f32ToBf16Bits, f32ToF16Bits } from '@rusty/backend';
import { afterAll, describe, expect, it } from 'vitest';
import { SafetensorsError } from '../errors';
import { FIXTURES, tempDir } from '../testing/fixtures';
import {
  formatInspection,
  inspectSafetensors,
  numberToBf16Bits,
  numberToF16Bits,
  openCheckpoint,
  readSafetensors,
  readSafetensorsDir,
  writeSafetensors,
  type TensorToWrite,
} from './index';

const { dir: TMP, cleanup } = tempDir();
afterAll(cleanup);

/** An independent parse of a safetensors file: header JSON and the data region. */
function rawParse(path: string) {
  const buf = readFileSync(path);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8')) as Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
  const data = buf.subarray(8 + n);
  return { buf, n, header, data };
}

const FIXTURE_FILES = ['llama-tiny', 'llama-tiny-f16'].flatMap((m) =>
  ['model.safetensors', 'expected.safetensors', 'after_adamw.safetensors', 'lora/adapter_model.safetensors', 'lora/expected.safetensors'].map((f) => join(FIXTURES, m, f)),
);

describe('fixtures', () => {
  it.each(FIXTURE_FILES)('reads %s exactly and round-trips it byte for byte', async (path) => {
    const { buf, header, data } = rawParse(path);
    const st = await readSafetensors(path);
    try {
      const names = Object.keys(header).filter((k) => k !== '__metadata__');
      expect([...st.tensors.keys()].sort()).toEqual([...names].sort());
      expect(st.metadata).toEqual((header as Record<string, unknown>).__metadata__ ?? {});
      const toWrite: Record<string, TensorToWrite> = {};
      for (const name of names) {
        const h = header[name]!;
        const info = st.tensors.get(name)!;
        expect(info.dtype).toBe(h.dtype);
        expect(info.shape).toEqual(h.shape);
        expect(info.byteLength).toBe(h.data_offsets[1] - h.data_offsets[0]);
        const raw = data.subarray(h.data_offsets[0], h.data_offsets[1]);
        const arr = await st.read(name);
        expect(Buffer.from(arr.buffer, arr.byteOffset, arr.byteLength).equals(raw)).toBe(true);
        // a few values against the raw bytes, decoded independently
        const f32 = await st.readF32(name);
        for (const i of [0, 1, Math.floor(f32.length / 2), f32.length - 1]) {
          const want =
            h.dtype === 'F32' ? raw.readFloatLE(i * 4) : h.dtype === 'F64' ? Math.fround(raw.readDoubleLE(i * 8)) : f16BitsToF32(raw.readUInt16LE(i * 2));
          expect(f32[i]).toBe(want);
        }
        if (h.dtype === 'F64') expect((arr as Float64Array)[3]).toBe(raw.readDoubleLE(24));
        toWrite[name] = { dtype: info.dtype, shape: info.shape, data: arr };
      }
      const out = join(TMP, 'roundtrip.safetensors');
      const meta = (header as Record<string, unknown>).__metadata__ as Record<string, string> | undefined;
      const res = await writeSafetensors(out, toWrite, meta);
      const written = readFileSync(out);
      expect(res.byteLength).toBe(written.byteLength);
      // the reference layout: whole file identical, header included
      expect(written.equals(buf)).toBe(true);
    } finally {
      await st.close();
    }
  });

  it('opens a checkpoint directory and inspects it', async () => {
    const dir = join(FIXTURES, 'llama-tiny');
    const ck = await openCheckpoint(dir);
    expect(ck.tensors.get('model.embed_tokens.weight')).toMatchObject({ dtype: 'F32', shape: [256, 64] });
    await ck.close();
    const ins = await inspectSafetensors(dir);
    expect(ins.totals.tensors).toBe(ins.tensors.length);
    // vocab 256, hidden 64, intermediate 176, 2 layers, 4 heads of 16, 2 kv heads, untied
    const layer = 64 * 64 * 2 + 64 * 32 * 2 + 3 * 64 * 176 + 2 * 64;
    expect(ins.totals.parameters).toBe(2 * 256 * 64 + 2 * layer + 64);
    expect(ins.totals.bytes).toBe(ins.totals.parameters * 4);
    expect(ins.tensors.map((t) => t.name).indexOf('model.layers.1.input_layernorm.weight')).toBeGreaterThan(0);
    const text = formatInspection(ins);
    expect(text).toContain('model.layers.0.self_attn.q_proj.weight');
    expect(text).toContain(`${ins.totals.parameters.toLocaleString('en-US')} parameters`);
    const f16 = await inspectSafetensors(join(FIXTURES, 'llama-tiny-f16', 'model.safetensors'));
    expect(f16.totals.parameters).toBe(ins.totals.parameters);
    expect(f16.totals.byDType.F16!.bytes).toBe(ins.totals.parameters * 2);
  });
});

function makeAll(): Record<string, TensorToWrite> {
  const n = 7;
  const f64 = Float64Array.from({ length: n }, (_, i) => Math.PI * (i - 3) * 1e-3);
  return {
    f64: { shape: [n], data: f64 },
    f32: { shape: [n], data: Float32Array.from(f64) },
    f16: { dtype: 'F16', shape: [n], data: Uint16Array.from(f64, (x) => f32ToF16Bits(x)) },
    bf16: { dtype: 'BF16', shape: [n], data: Uint16Array.from(f64, (x) => f32ToBf16Bits(x)) },
    i64: { shape: [n], data: BigInt64Array.from({ length: n }, (_, i) => BigInt(i - 3) * 1000n) },
    u64: { shape: [n], data: BigUint64Array.from({ length: n }, (_, i) => BigInt(i) * 7n) },
    i32: { shape: [n], data: Int32Array.from({ length: n }, (_, i) => -(i * 100000)) },
    u32: { shape: [n], data: Uint32Array.from({ length: n }, (_, i) => i * 600000000) },
    i16: { shape: [n], data: Int16Array.from({ length: n }, (_, i) => i * -1000) },
    u16: { dtype: 'U16', shape: [n], data: Uint16Array.from({ length: n }, (_, i) => i * 9000) },
    i8: { shape: [n], data: Int8Array.from({ length: n }, (_, i) => i * -18) },
    u8: { shape: [n], data: Uint8Array.from({ length: n }, (_, i) => i * 36) },
    bool: { dtype: 'BOOL', shape: [n], data: Uint8Array.from({ length: n }, (_, i) => i % 2) },
    e4m3: { dtype: 'F8_E4M3', shape: [4], data: Uint8Array.of(0x38, 0xb8, 0x7e, 0x01) },
    e5m2: { dtype: 'F8_E5M2', shape: [4], data: Uint8Array.of(0x3c, 0xbc, 0x7b, 0x7c) },
    e8m0: { dtype: 'F8_E8M0', shape: [3], data: Uint8Array.of(127, 130, 0) },
    scalar: { shape: [], data: Float32Array.of(42) },
    empty: { shape: [3, 0, 2], data: new Float32Array(0) },
    matrix: { shape: [2, 3], data: Float32Array.of(1, 2, 3, 4, 5, 6) },
  };
}

describe('every dtype', () => {
  it('writes, reads raw, reads as f32', async () => {
    const path = join(TMP, 'all.safetensors');
    const tensors = makeAll();
    await writeSafetensors(path, tensors, { format: 'pt', note: 'ünïcode "quoted"' });
    const st = await readSafetensors(path);
    expect(st.metadata).toEqual({ format: 'pt', note: 'ünïcode "quoted"' });
    for (const [name, t] of Object.entries(tensors)) {
      const got = await st.read(name);
      expect(got.constructor).toBe((t.data as unknown as ArrayBufferView).constructor);
      expect(Array.from(got as ArrayLike<number>)).toEqual(Array.from(t.data as unknown as ArrayLike<number>));
      expect(st.tensors.get(name)!.shape).toEqual(t.shape);
    }
    const f = (name: string) => st.readF32(name).then((a) => Array.from(a));
    const f64 = (tensors.f64!.data as Float64Array);
    expect(await f('f64')).toEqual(Array.from(Float32Array.from(f64)));
    expect(await f('f16')).toEqual(Array.from(f64, (x) => f16BitsToF32(f32ToF16Bits(x))));
    expect(await f('bf16')).toEqual(Array.from(f64, (x) => bf16BitsToF32(f32ToBf16Bits(x))));
    expect(await f('i64')).toEqual([-3000, -2000, -1000, 0, 1000, 2000, 3000]);
    expect(await f('u32')).toEqual(Array.from({ length: 7 }, (_, i) => Math.fround(i * 600000000)));
    expect(await f('bool')).toEqual([0, 1, 0, 1, 0, 1, 0]);
    expect(await f('e4m3')).toEqual([1, -1, 448, 2 ** -9]);
    expect(await f('e5m2')).toEqual([1, -1, 57344, Infinity]);
    expect(await f('e8m0')).toEqual([1, 8, 2 ** -127]);
    expect(await f('scalar')).toEqual([42]);
    expect(await f('empty')).toEqual([]);
    await st.close();
    await expect(st.read('f32')).rejects.toThrow(/closed/);
  });

  it('rounds numbers to f16/bf16 exactly (no double rounding from f64)', () => {
    for (let i = 0; i < 20000; i++) {
      const x = (Math.random() - 0.5) * 2 ** (Math.random() * 40 - 20);
      const f = Math.fround(x);
      expect(numberToF16Bits(f)).toBe(f32ToF16Bits(f));
      expect(numberToBf16Bits(f)).toBe(f32ToBf16Bits(f));
    }
    for (const x of [0, -0, 65504, 65519.99, 65520, 1e9, -Infinity, 2 ** -24, 2 ** -25, 2 ** -25 * 1.0001, 6.1e-5, NaN])
      expect(numberToF16Bits(x)).toBe(f32ToF16Bits(x));
    // a double just above a half-way point between two halves: f64 -> f32 -> f16 would round to even, wrong
    const x = 1 + 2 ** -11 + 2 ** -40;
    expect(numberToF16Bits(x)).toBe(0x3c01);
    expect(f32ToF16Bits(x)).toBe(0x3c00);
  });
});

describe('sharded checkpoints', () => {
  it('merges shards through the index and reports a missing shard by name', async () => {
    const dir = join(TMP, 'sharded');
    mkdirSync(dir, { recursive: true });
    const all = makeAll();
    const names = Object.keys(all);
    const a = Object.fromEntries(names.slice(0, 8).map((n) => [n, all[n]!]));
    const b = Object.fromEntries(names.slice(8).map((n) => [n, all[n]!]));
    await writeSafetensors(join(dir, 'model-00001-of-00002.safetensors'), a, { format: 'pt' });
    await writeSafetensors(join(dir, 'model-00002-of-00002.safetensors'), b, { format: 'pt' });
    const weight_map = Object.fromEntries(names.map((n, i) => [n, i < 8 ? 'model-00001-of-00002.safetensors' : 'model-00002-of-00002.safetensors']));
    writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify({ metadata: { total_size: 1234 }, weight_map }));
    for (const opener of [() => openCheckpoint(dir), () => readSafetensorsDir(dir), () => openCheckpoint(join(dir, 'model.safetensors.index.json'))]) {
      const ck = await opener();
      expect(ck.metadata).toEqual({ format: 'pt', total_size: '1234' });
      expect([...ck.tensors.keys()].sort()).toEqual([...names].sort());
      for (const n of names) {
        const got = await ck.read(n);
        expect(Array.from(got as ArrayLike<number>)).toEqual(Array.from(all[n]!.data as unknown as ArrayLike<number>));
      }
      expect(ck.tensors.get('u8')!.file).toContain('model-00002-of-00002.safetensors');
      await ck.close();
    }
    const ins = await inspectSafetensors(dir);
    expect(ins.files.length).toBe(2);
    expect(ins.totals.tensors).toBe(names.length);

    const broken = join(TMP, 'sharded-missing');
    mkdirSync(broken, { recursive: true });
    writeFileSync(join(broken, 'model.safetensors.index.json'), JSON.stringify({ weight_map: { x: 'model-00009-of-00009.safetensors' } }));
    await expect(openCheckpoint(broken)).rejects.toThrow(SafetensorsError);
    await expect(openCheckpoint(broken)).rejects.toThrow(/shard 'model-00009-of-00009.safetensors'.*missing/);

    const escape = join(TMP, 'sharded-escape');
    mkdirSync(escape, { recursive: true });
    writeFileSync(join(escape, 'model.safetensors.index.json'), JSON.stringify({ weight_map: { x: '../all.safetensors' } }));
    await expect(openCheckpoint(escape)).rejects.toThrow(/outside the checkpoint directory/);

    const notInShard = join(TMP, 'sharded-absent');
    mkdirSync(notInShard, { recursive: true });
    await writeSafetensors(join(notInShard, 's.safetensors'), { a: all.f32! });
    writeFileSync(join(notInShard, 'model.safetensors.index.json'), JSON.stringify({ weight_map: { a: 's.safetensors', zz: 's.safetensors' } }));
    await expect(openCheckpoint(notInShard)).rejects.toThrow(/'zz' is mapped to shard 's.safetensors' but that shard does not contain it/);

    writeFileSync(join(notInShard, 'model.safetensors.index.json'), '{"weight_map": ');
    await expect(openCheckpoint(notInShard)).rejects.toThrow(/index is not valid JSON/);
    writeFileSync(join(notInShard, 'model.safetensors.index.json'), '{"weight_map": {"a": 3}}');
    await expect(openCheckpoint(notInShard)).rejects.toThrow(/invalid shard index at 'weight_map.a'/);

    const emptyDir = join(TMP, 'empty-dir');
    mkdirSync(emptyDir, { recursive: true });
    await expect(openCheckpoint(emptyDir)).rejects.toThrow(/no model.safetensors or model.safetensors.index.json/);
    await expect(openCheckpoint(join(TMP, 'nope'))).rejects.toThrow(/no such file or directory/);
  });
});

describe('writer', () => {
  it('is atomic: a failing write leaves neither a partial file nor a temporary file', async () => {
    const dir = join(TMP, 'atomic');
    mkdirSync(dir, { recursive: true });
    const path = join(dir, 'w.safetensors');
    await writeSafetensors(path, { a: { shape: [2], data: Float32Array.of(1, 2) } });
    const before = readFileSync(path);
    await expect(
      writeSafetensors(path, {
        a: { shape: [2], data: Float32Array.of(3, 4) },
        b: { dtype: 'F32', shape: [4], data: () => new Float32Array(3) },
      }),
    ).rejects.toThrow(/tensor 'b'.*needs 16 bytes but its data has 12/);
    expect(readFileSync(path).equals(before)).toBe(true);
    expect(readdirSync(dir)).toEqual(['w.safetensors']);
  });

  it('validates its input and takes Maps, iterables and lazy data', async () => {
    const path = join(TMP, 'v.safetensors');
    await expect(writeSafetensors(path, { a: { shape: [2], data: new Uint16Array(2) } })).rejects.toThrow(/give its dtype/);
    await expect(writeSafetensors(path, { a: { dtype: 'F32', shape: [-1], data: new Float32Array(0) } })).rejects.toThrow(/invalid dimension -1/);
    await expect(writeSafetensors(path, { a: { dtype: 'F128' as 'F32', shape: [1], data: new Float32Array(1) } })).rejects.toThrow(/unknown dtype 'F128'/);
    await expect(writeSafetensors(path, { __metadata__: { shape: [1], data: new Float32Array(1) } })).rejects.toThrow(/cannot be a tensor name/);
    await expect(writeSafetensors(path, { a: { shape: [3], data: new Float32Array(2) } })).rejects.toThrow(/needs 12 bytes but its data has 8/);
    await expect(writeSafetensors(path, {}, { a: 1 as unknown as string })).rejects.toThrow(/metadata value of 'a' must be a string/);
    const m = new Map<string, TensorToWrite>([
      ['z', { dtype: 'F16', shape: [3], data: async () => Uint16Array.of(1, 2, 3) }],
      ['a', { shape: [1], data: Float64Array.of(1.5) }],
    ]);
    await writeSafetensors(path, m);
    const st = await readSafetensors(path);
    expect([...st.tensors.keys()]).toEqual(['a', 'z']);
    expect(Array.from((await st.read("z")) as Uint16Array)).toEqual([1, 2, 3]);
    await st.close();
    await writeSafetensors(path, [['only', { shape: [0], data: new Int8Array(0) }]]);
    const st2 = await readSafetensors(path);
    expect(st2.tensors.get('only')).toMatchObject({ dtype: 'I8', shape: [0], byteLength: 0 });
    await st2.close();
    await writeSafetensors(path, {});
    expect(readFileSync(path).subarray(8).toString()).toBe('{}      ');
  });
});

describe('large files', () => {
  it('reads a tensor beyond 4 GB in a sparse file', async () => {
    const path = join(TMP, 'sparse.safetensors');
    const big = 4_500_000_000;
    const headerObj = {
      big: { dtype: 'U8', shape: [big], data_offsets: [0, big] },
      tail: { dtype: 'F32', shape: [4], data_offsets: [big, big + 16] },
    };
    let json = JSON.stringify(headerObj);
    json += ' '.repeat((8 - (json.length % 8)) % 8);
    const prefix = Buffer.alloc(8);
    prefix.writeBigUInt64LE(BigInt(json.length));
    const fh = await open(path, 'w');
    await fh.write(Buffer.concat([prefix, Buffer.from(json)]), 0, 8 + json.length, 0);
    const dataStart = 8 + json.length;
    await fh.write(Buffer.from(Float32Array.of(1.5, -2, 3e9, 7).buffer), 0, 16, dataStart + big);
    await fh.close();
    const st = await readSafetensors(path);
    expect(st.tensors.get('tail')!.byteOffset).toBe(dataStart + big);
    expect(Array.from(await st.readF32('tail'))).toEqual([1.5, -2, 3e9, 7]);
    expect(st.fileSize).toBe(dataStart + big + 16);
    await st.close();
  });
});
