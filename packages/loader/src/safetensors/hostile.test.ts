import { readFileSync, writeFileSync, mkdirSync, truncateSync } from 'node:fs';
import { join } from 'node:path';
import { testing } from '@rusty/backend';
import { afterAll, describe, expect, it } from 'vitest';
import { SafetensorsError } from '../errors';
import { tempDir } from '../testing/fixtures';
import { readSafetensors, writeSafetensors, type TensorToWrite } from './index';

const { dir: TMP, cleanup } = tempDir();
afterAll(cleanup);

let counter = 0;
/** Write a file: 8-byte length (the header's, unless `n` is given), header bytes, data bytes. */
function craft(header: string | Uint8Array, data: Uint8Array | number = 0, n?: bigint): string {
  const h = typeof header === 'string' ? Buffer.from(header, 'utf8') : Buffer.from(header);
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(n ?? BigInt(h.byteLength));
  const d = typeof data === 'number' ? Buffer.alloc(data) : Buffer.from(data);
  const path = join(TMP, `crafted-${counter++}.safetensors`);
  writeFileSync(path, Buffer.concat([prefix, h, d]));
  return path;
}

async function rejects(path: string, pattern: RegExp): Promise<void> {
  const err = await readSafetensors(path).then(
    async (st) => {
      await st.close();
      return undefined;
    },
    (e: unknown) => e,
  );
  expect(err, `expected ${path} to be rejected`).toBeInstanceOf(SafetensorsError);
  const msg = (err as Error).message;
  expect(msg.startsWith(path), msg).toBe(true);
  expect(msg).toMatch(pattern);
}

const entry = (dtype: string, shape: unknown, offs: unknown) => ({ dtype, shape, data_offsets: offs });
const header = (o: object) => JSON.stringify(o);

describe('hostile safetensors files', () => {
  it('truncated files', async () => {
    await rejects(craft(new Uint8Array(0)).replace(/$/, ''), /./); // sanity: an empty header is rejected
    const empty = join(TMP, 'empty.safetensors');
    writeFileSync(empty, Buffer.alloc(0));
    await rejects(empty, /truncated: 0 bytes cannot hold the 8-byte header length/);
    const five = join(TMP, 'five.safetensors');
    writeFileSync(five, Buffer.alloc(5));
    await rejects(five, /truncated: 5 bytes/);
    // a valid file cut in its data region and in its header
    const path = join(TMP, 'valid.safetensors');
    await writeSafetensors(path, { a: { shape: [4], data: Float32Array.of(1, 2, 3, 4) }, b: { shape: [2], data: Float64Array.of(1, 2) } });
    const full = readFileSync(path);
    const cutData = join(TMP, 'cut-data.safetensors');
    writeFileSync(cutData, full.subarray(0, full.byteLength - 3));
    await rejects(cutData, /tensor 'a' has data_offsets \[16, 32\] past the end of the data \(29 bytes\)/);
    const cutHeader = join(TMP, 'cut-header.safetensors');
    writeFileSync(cutHeader, full.subarray(0, 30));
    await rejects(cutHeader, /header length \d+ runs past the end of the file \(30 bytes\)/);
  });

  it('header length past the end or over 100 MB', async () => {
    await rejects(craft('{}', 0, 1000n), /header length 1000 runs past the end of the file \(10 bytes\)/);
    await rejects(craft('{}', 0, 100_000_001n), /header length 100000001 exceeds the 100000000-byte limit/);
    await rejects(craft('{}', 0, 2n ** 64n - 1n), /header length 18446744073709551615 exceeds/);
    await rejects(craft('{}', 0, 2n ** 53n + 1n), /exceeds/);
    await rejects(craft('', 0), /header length 0 is too small/);
  });

  it('header not UTF-8, not JSON, not an object', async () => {
    await rejects(craft(Uint8Array.of(0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d)), /header is not valid UTF-8/);
    await rejects(craft(Uint8Array.of(0x7b, 0x22, 0xed, 0xa0, 0x80, 0x22, 0x7d)), /not valid UTF-8/); // a UTF-8 encoded surrogate
    await rejects(craft('{"a": '), /header is not valid JSON/);
    await rejects(craft('[1, 2]   '), /does not start with '\{'/);
    await rejects(craft('  {}    '), /does not start with '\{'/);
    await rejects(craft('{"a": 1}'), /tensor 'a' has an invalid header entry/);
    await rejects(craft(header({ a: entry('F32', [1], [0, 4]), b: null }), 4), /tensor 'b' has an invalid header entry/);
    await rejects(craft('{"a":' + '['.repeat(200_000) + ']'.repeat(200_000) + '}'), /tensor 'a' has an invalid header entry|not valid JSON/);
    await rejects(craft(header({ __metadata__: { format: 1 } })), /__metadata__ must map strings to strings/);
    await rejects(craft(header({ __metadata__: ['x'] })), /__metadata__ must map strings to strings/);
  });

  it('offsets out of range, reversed, overlapping, with holes or trailing bytes', async () => {
    await rejects(craft(header({ a: entry('F32', [250], [0, 1000]) }), 16), /tensor 'a' has data_offsets \[0, 1000\] past the end of the data \(16 bytes\)/);
    await rejects(craft(header({ a: entry('F32', [4], [16, 0]) }), 16), /tensor 'a' has data_offsets \[16, 0\] with end before start/);
    await rejects(craft(header({ a: entry('F32', [4], [0, 16]), b: entry('F32', [4], [8, 24]) }), 24), /tensor 'b' data_offsets \[8, 24\] overlaps tensor 'a' \[0, 16\]/);
    await rejects(craft(header({ a: entry('F32', [2], [0, 8]), b: entry('F32', [2], [16, 24]) }), 24), /hole at bytes \[8, 16\)/);
    await rejects(craft(header({ a: entry('F32', [2], [8, 16]) }), 16), /hole at bytes \[0, 8\)/);
    await rejects(craft(header({ a: entry('F32', [2], [0, 8]) }), 12), /4 bytes after the last tensor are not covered/);
    await rejects(craft(header({}), 1), /1 bytes after the last tensor/);
    await rejects(craft(header({ a: entry('F32', [2], [0, 1e300]) }), 8), /tensor 'a' has an invalid header entry \(data_offsets\[1\]/);
    await rejects(craft(header({ a: entry('F32', [2], [-8, 0]) }), 8), /tensor 'a' has an invalid header entry/);
    await rejects(craft(header({ a: entry('F32', [2], [0]) }), 8), /tensor 'a' has an invalid header entry/);
  });

  it('offsets not matching shape x dtype; unknown dtype; negative or absurd shapes', async () => {
    await rejects(craft(header({ a: entry('F32', [5], [0, 16]) }), 16), /tensor 'a' F32\[5\] needs 20 bytes but its data_offsets \[0, 16\] span 16/);
    await rejects(craft(header({ a: entry('F16', [3, 3], [0, 16]) }), 16), /F16\[3, 3\] needs 18 bytes/);
    await rejects(craft(header({ a: entry('F128', [1], [0, 16]) }), 16), /tensor 'a' has unknown dtype 'F128'/);
    await rejects(craft(header({ a: entry('f32', [4], [0, 16]) }), 16), /unknown dtype 'f32'/);
    await rejects(craft(header({ a: { dtype: 7, shape: [4], data_offsets: [0, 16] } }), 16), /invalid header entry \(dtype/);
    await rejects(craft(header({ a: entry('F32', [-4], [0, 16]) }), 16), /invalid header entry \(shape\[0\]/);
    await rejects(craft(header({ a: entry('F32', [1.5], [0, 16]) }), 16), /invalid header entry \(shape\[0\]/);
    await rejects(craft(header({ a: entry('F32', [2 ** 60], [0, 16]) }), 16), /invalid header entry \(shape\[0\]/);
    await rejects(craft(header({ a: entry('F32', [2 ** 30, 2 ** 30, 2 ** 30], [0, 16]) }), 16), /needs more than 2\^53 bytes/);
    await rejects(craft(header({ a: entry('U8', [2 ** 26, 2 ** 26], [0, 16]) }), 16), /needs 4503599627370496 bytes but its data_offsets \[0, 16\] span 16/);
    await rejects(craft(header({ a: entry('F32', '4', [0, 16]) }), 16), /invalid header entry \(shape/);
  });

  it('reports a missing tensor, a directory, a missing file and a file truncated after opening', async () => {
    const path = join(TMP, 'later.safetensors');
    await writeSafetensors(path, { 'model.w': { shape: [1024], data: new Float32Array(1024) } });
    const st = await readSafetensors(path);
    await expect(st.read('w')).rejects.toThrow(/no tensor named 'w' \(1 tensors; similar: model.w\)/);
    truncateSync(path, 100);
    await expect(st.read('model.w')).rejects.toThrow(/unexpected end of file at offset 100/);
    await st.close();
    // a tensor read in several parallel pieces, then the same after the file lost its tail
    const bigPath = join(TMP, 'big.safetensors');
    const big = Uint8Array.from({ length: 20 << 20 }, (_, i) => (i * 2654435761) >>> 24);
    await writeSafetensors(bigPath, { big: { shape: [big.length], data: big } });
    const sb = await readSafetensors(bigPath);
    expect(Buffer.from(await sb.readBytes('big')).equals(Buffer.from(big))).toBe(true);
    truncateSync(bigPath, 12 << 20);
    await expect(sb.readBytes('big')).rejects.toThrow(/unexpected end of file at offset 12582912/);
    await expect(sb.readF32('big')).rejects.toThrow(SafetensorsError);
    await sb.close();
    const d = join(TMP, 'a-dir');
    mkdirSync(d, { recursive: true });
    await expect(readSafetensors(d)).rejects.toThrow(/cannot open: is a directory/);
    await expect(readSafetensors(join(TMP, 'missing.safetensors'))).rejects.toThrow(/cannot open: no such file/);
  });
});

// ---- fuzz: mutated valid files are either rejected with a SafetensorsError or read exactly ----

type OracleTensor = { dtype: string; shape: number[]; start: number; end: number };
const SIZES: Record<string, number> = { F64: 8, F32: 4, F16: 2, BF16: 2, I64: 8, I32: 4, I16: 2, I8: 1, U64: 8, U32: 4, U16: 2, U8: 1, BOOL: 1, F8_E4M3: 1, F8_E5M2: 1, F8_E8M0: 1 };

/** An independent statement of the format's rules: the tensors if `bytes` is a valid file, else null. */
function oracle(bytes: Uint8Array): Map<string, OracleTensor> | null {
  if (bytes.byteLength < 8) return null;
  const n = Buffer.from(bytes).readBigUInt64LE(0);
  if (n > 100_000_000n || 8n + n > BigInt(bytes.byteLength) || n < 2n) return null;
  const hb = bytes.subarray(8, 8 + Number(n));
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(hb);
  } catch {
    return null;
  }
  if (!text.startsWith('{')) return null;
  let obj: Record<string, unknown>;
  try {
    obj = JSON.parse(text);
  } catch {
    return null;
  }
  if (!obj || typeof obj !== 'object' || Array.isArray(obj)) return null;
  const isIdx = (x: unknown) => typeof x === 'number' && Number.isSafeInteger(x) && x >= 0;
  const out = new Map<string, OracleTensor>();
  for (const [k, v] of Object.entries(obj)) {
    if (k === '__metadata__') {
      if (v === null) continue;
      if (typeof v !== 'object' || Array.isArray(v) || Object.values(v as object).some((x) => typeof x !== 'string')) return null;
      continue;
    }
    const e = v as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (!e || typeof e !== 'object' || Array.isArray(e)) return null;
    if (typeof e.dtype !== 'string' || !(e.dtype in SIZES)) return null;
    if (!Array.isArray(e.shape) || !e.shape.every(isIdx)) return null;
    if (!Array.isArray(e.data_offsets) || e.data_offsets.length !== 2 || !e.data_offsets.every(isIdx)) return null;
    const [s, t] = e.data_offsets as number[];
    let numel = 1n;
    for (const d of e.shape as number[]) numel *= BigInt(d);
    if (BigInt(t! - s!) !== numel * BigInt(SIZES[e.dtype]!) || t! < s!) return null;
    out.set(k, { dtype: e.dtype, shape: e.shape as number[], start: s!, end: t! });
  }
  const spans = [...out.values()].map((t) => [t.start, t.end] as const).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let pos = 0;
  for (const [s, e] of spans) {
    if (s !== pos) return null;
    pos = e;
  }
  return pos === bytes.byteLength - 8 - Number(n) ? out : null;
}

async function baseFiles(): Promise<Uint8Array[]> {
  const sets: Record<string, TensorToWrite>[] = [
    { w: { shape: [3, 4], data: Float32Array.from({ length: 12 }, (_, i) => i / 7) }, b: { dtype: 'BF16', shape: [4], data: Uint16Array.of(0x3f80, 0x4000, 0xbf80, 0) } },
    {
      ids: { shape: [2, 3], data: BigInt64Array.of(1n, 2n, 3n, -4n, 5n, 6n) },
      mask: { dtype: 'BOOL', shape: [6], data: Uint8Array.of(1, 0, 1, 1, 0, 1) },
      half: { dtype: 'F16', shape: [3], data: Uint16Array.of(0x3c00, 0x4000, 0x7c00) },
      none: { shape: [0, 5], data: new Float64Array(0) },
      s: { shape: [], data: Int32Array.of(-7) },
    },
    { 'model.layers.0.q': { shape: [2, 2], data: Float64Array.of(1, -2, 3, -4) }, e4: { dtype: 'F8_E4M3', shape: [3], data: Uint8Array.of(1, 2, 3) } },
  ];
  const out: Uint8Array[] = [];
  for (const [i, s] of sets.entries()) {
    const p = join(TMP, `base-${i}.safetensors`);
    await writeSafetensors(p, s, i === 1 ? undefined : { format: 'pt', i: String(i) });
    out.push(new Uint8Array(readFileSync(p)));
  }
  return out;
}

function mutate(src: Uint8Array, r: () => number): Uint8Array {
  const int = (n: number) => Math.floor(r() * n);
  const b = new Uint8Array(src);
  const n = Number(Buffer.from(b).readBigUInt64LE(0));
  const hStart = 8;
  const hEnd = 8 + n;
  switch (int(8)) {
    case 0: // bit flips anywhere, or in the data region only
      for (let k = 1 + int(4), data = r() < 0.5; k > 0; k--) {
        const i = data && b.byteLength > hEnd ? hEnd + int(b.byteLength - hEnd) : int(b.byteLength);
        b[i]! ^= 1 << int(8);
      }
      return b;
    case 1: // truncation
      return b.subarray(0, int(b.byteLength));
    case 2: {
      // header byte edit to a JSON-significant or random character
      const chars = '0123456789{}[]",: -.eE\x00\xff';
      const i = hStart + int(n);
      b[i] = r() < 0.8 ? chars.charCodeAt(int(chars.length)) : int(256);
      return b;
    }
    case 3: {
      // a digit in the header changed (keeps the JSON valid: hits shapes and offsets)
      const digits: number[] = [];
      for (let i = hStart; i < hEnd; i++) if (b[i]! >= 0x30 && b[i]! <= 0x39) digits.push(i);
      if (digits.length) b[digits[int(digits.length)]!] = 0x30 + int(10);
      return b;
    }
    case 4: {
      // header length field changed
      const v = new DataView(b.buffer);
      if (r() < 0.5) v.setBigUint64(0, BigInt(Math.max(0, n + int(33) - 16)), true);
      else b[int(8)] = int(256);
      return b;
    }
    case 5: {
      // bytes appended
      const extra = new Uint8Array(1 + int(16)).map(() => int(256));
      const c = new Uint8Array(b.byteLength + extra.byteLength);
      c.set(b);
      c.set(extra, b.byteLength);
      return c;
    }
    case 6: {
      // a range of the header deleted (length field left as is)
      const i = hStart + int(n);
      const len = 1 + int(8);
      return Uint8Array.from([...b.subarray(0, i), ...b.subarray(i + len)]);
    }
    default: {
      // a dtype name swapped for another
      const text = Buffer.from(b.subarray(hStart, hEnd)).toString('latin1');
      const names = Object.keys(SIZES);
      const swapped = text.replace(/"dtype":"([A-Z0-9_]+)"/, () => `"dtype":"${names[int(names.length)]}"`);
      const body = Buffer.from(swapped, 'latin1');
      const c = new Uint8Array(8 + body.byteLength + (b.byteLength - hEnd));
      c.set(b.subarray(0, 8));
      new DataView(c.buffer).setBigUint64(0, BigInt(body.byteLength), true);
      c.set(body, 8);
      c.set(b.subarray(hEnd), 8 + body.byteLength);
      return c;
    }
  }
}

describe('fuzz', () => {
  it('300 mutated files: typed errors or exact reads, never anything else', async () => {
    const bases = await baseFiles();
    const r = testing.rng(20261122);
    let accepted = 0;
    let rejected = 0;
    const path = join(TMP, 'fuzz.safetensors');
    for (let c = 0; c < 300; c++) {
      const bytes = mutate(bases[c % bases.length]!, r);
      writeFileSync(path, bytes);
      const want = oracle(bytes);
      let st;
      try {
        st = await readSafetensors(path);
      } catch (e) {
        expect(e, `case ${c}: ${(e as Error).message}`).toBeInstanceOf(SafetensorsError);
        expect((e as Error).message.startsWith(path)).toBe(true);
        expect(want, `case ${c}: the reader rejected a valid file: ${(e as Error).message}`).toBeNull();
        rejected++;
        continue;
      }
      try {
        expect(want, `case ${c}: the reader accepted an invalid file`).not.toBeNull();
        expect([...st.tensors.keys()].sort()).toEqual([...want!.keys()].sort());
        const n = Number(Buffer.from(bytes).readBigUInt64LE(0));
        for (const [name, t] of want!) {
          const info = st.tensors.get(name)!;
          expect(info.dtype).toBe(t.dtype);
          expect(info.shape).toEqual(t.shape);
          const got = await st.readBytes(name);
          expect(Buffer.from(got).equals(Buffer.from(bytes.subarray(8 + n + t.start, 8 + n + t.end)))).toBe(true);
          const f = await st.readF32(name);
          expect(f.length).toBe(t.shape.reduce((a, d) => a * d, 1));
        }
      } finally {
        await st.close();
      }
      accepted++;
    }
    // the mutations must exercise both outcomes
    expect(accepted).toBeGreaterThan(20);
    expect(rejected).toBeGreaterThan(100);
  });
});
