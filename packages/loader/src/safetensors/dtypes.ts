/** The element types of the safetensors format (as spelled in a header). */
export type SafetensorsDType =
  | 'F64'
  | 'F32'
  | 'F16'
  | 'BF16'
  | 'I64'
  | 'I32'
  | 'I16'
  | 'I8'
  | 'U64'
  | 'U32'
  | 'U16'
  | 'U8'
  | 'BOOL'
  | 'F8_E4M3'
  | 'F8_E5M2'
  | 'F8_E8M0';

/** What `read()` returns for each dtype: the raw elements, 16-bit floats as their bit patterns, fp8 as bytes. */
export type SafetensorsArray =
  | Float64Array
  | Float32Array
  | BigInt64Array
  | BigUint64Array
  | Int32Array
  | Uint32Array
  | Int16Array
  | Uint16Array
  | Int8Array
  | Uint8Array;

type ArrayCtor = { new (buffer: ArrayBuffer, byteOffset: number, length: number): SafetensorsArray; BYTES_PER_ELEMENT: number };

interface DTypeInfo {
  /** Bytes per element. */
  readonly size: number;
  /** Position in the reference implementation's dtype order (its writer puts larger ranks first). */
  readonly rank: number;
  readonly array: ArrayCtor;
  readonly kind: 'float' | 'int' | 'uint' | 'bool';
}

const INFO: Record<SafetensorsDType, DTypeInfo> = {
  BOOL: { size: 1, rank: 0, array: Uint8Array, kind: 'bool' },
  U8: { size: 1, rank: 1, array: Uint8Array, kind: 'uint' },
  I8: { size: 1, rank: 2, array: Int8Array, kind: 'int' },
  F8_E5M2: { size: 1, rank: 3, array: Uint8Array, kind: 'float' },
  F8_E4M3: { size: 1, rank: 4, array: Uint8Array, kind: 'float' },
  F8_E8M0: { size: 1, rank: 5, array: Uint8Array, kind: 'float' },
  I16: { size: 2, rank: 6, array: Int16Array, kind: 'int' },
  U16: { size: 2, rank: 7, array: Uint16Array, kind: 'uint' },
  F16: { size: 2, rank: 8, array: Uint16Array, kind: 'float' },
  BF16: { size: 2, rank: 9, array: Uint16Array, kind: 'float' },
  I32: { size: 4, rank: 10, array: Int32Array, kind: 'int' },
  U32: { size: 4, rank: 11, array: Uint32Array, kind: 'uint' },
  F32: { size: 4, rank: 12, array: Float32Array, kind: 'float' },
  F64: { size: 8, rank: 13, array: Float64Array, kind: 'float' },
  I64: { size: 8, rank: 14, array: BigInt64Array as unknown as ArrayCtor, kind: 'int' },
  U64: { size: 8, rank: 15, array: BigUint64Array as unknown as ArrayCtor, kind: 'uint' },
};

/** Every dtype this reader and writer handle. */
export const SAFETENSORS_DTYPES = Object.keys(INFO) as readonly SafetensorsDType[];

export function isSafetensorsDType(s: unknown): s is SafetensorsDType {
  return typeof s === 'string' && Object.prototype.hasOwnProperty.call(INFO, s);
}

/** Bytes per element of a dtype. */
export function dtypeSize(d: SafetensorsDType): number {
  return INFO[d].size;
}

export function dtypeRank(d: SafetensorsDType): number {
  return INFO[d].rank;
}

export function dtypeKind(d: SafetensorsDType): DTypeInfo['kind'] {
  return INFO[d].kind;
}

/** A typed array of the dtype's element type viewing `length` elements of `buffer`. */
export function arrayOf(d: SafetensorsDType, buffer: ArrayBuffer, byteOffset: number, length: number): SafetensorsArray {
  return new INFO[d].array(buffer, byteOffset, length);
}

/** The dtype a typed array implies when the caller names none (16-bit arrays are ambiguous: F16, BF16, U16). */
export function inferDType(data: ArrayBufferView): SafetensorsDType | undefined {
  if (data instanceof Float64Array) return 'F64';
  if (data instanceof Float32Array) return 'F32';
  if (data instanceof BigInt64Array) return 'I64';
  if (data instanceof BigUint64Array) return 'U64';
  if (data instanceof Int32Array) return 'I32';
  if (data instanceof Uint32Array) return 'U32';
  if (data instanceof Int16Array) return 'I16';
  if (data instanceof Int8Array) return 'I8';
  if (data instanceof Uint8Array) return 'U8';
  return undefined;
}

/** Number of elements of a shape, or `Infinity` when it exceeds 2^53 (no real file can hold that). */
export function shapeNumel(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) if (d === 0) return 0;
  for (const d of shape) {
    n *= d;
    if (n > Number.MAX_SAFE_INTEGER) return Infinity;
  }
  return n;
}
