import { cast, ConfigError, DTYPES, empty, floatNames, formatFromSafetensors, formatOf, isDType, isHalf, numel, release, storageBytes, type Context, type DeviceTensor, type DType } from '@rusty/backend';
import { SafetensorsError } from '../errors';
import { arrayOf, dtypeSize, type SafetensorsArray, type SafetensorsDType } from './dtypes';
import { chunkElements, decodeToF32, encodeHalf, encodeInt32 } from './convert';
import { headerLength, parseHeader, type TensorInfo } from './header';
import { readExactly, readParallel, streamRange } from './io';
import { blobSource } from '../io/blob';
import { isBlobLike, isByteSource, type BlobLike, type ByteSource } from '../io/source';

export type { TensorInfo } from './header';

/** Options of `upload`. */
export interface UploadOptions {
  /**
   * Storage dtype on the GPU. Default: F32 -> f32, F16 -> f16, BF16 -> bf16 (kept packed 16-bit),
   * F64 and fp8 -> f32, signed integers -> i32, unsigned integers and BOOL -> u32.
   * Floats convert to any float dtype (round to nearest even, f16/bf16 exactly from f64); integers convert to
   * i32/u32 when every value fits, or to a float dtype.
   */
  dtype?: DType;
  /** Bytes read from disk per step (default 8 MiB; rounded to whole elements and 4-byte words). */
  chunkBytes?: number;
  /** Convert between F32, F16 and BF16 on the CPU instead of uploading as stored and casting on the GPU (the
   *  default where both fit one storage binding). Both give the same bits. */
  cpuConvert?: boolean;
}

/** Read access to the tensors of one safetensors file or of a merged (sharded) checkpoint. */
export interface SafetensorsReader {
  /** The file, index file or directory this was opened from. */
  readonly path: string;
  /** The `__metadata__` string map (for a sharded checkpoint: the first shard's, then the index's `metadata`). */
  readonly metadata: Readonly<Record<string, string>>;
  /** Every tensor, in file order. `byteOffset` is absolute within `file`. */
  readonly tensors: ReadonlyMap<string, TensorInfo>;
  /** The raw elements: Float64Array, Float32Array, Uint16Array (F16/BF16/U16 bits), BigInt64Array, ... */
  read(name: string): Promise<SafetensorsArray>;
  /** The raw little-endian bytes of a tensor. */
  readBytes(name: string): Promise<Uint8Array>;
  /** The values as f32 (f16, bf16, fp8 and integers up to 2^24 exactly; f64 and 64-bit integers rounded). */
  readF32(name: string): Promise<Float32Array>;
  /** Stream a tensor from disk into a new GPU tensor (host memory stays bounded by a few 8 MiB chunks). */
  upload(ctx: Context, name: string, opts?: UploadOptions): Promise<DeviceTensor>;
  /** Close the file handle(s); later reads throw. */
  close(): Promise<void>;
}

/** Bytes per chunk when streaming a tensor to the GPU or converting it (8 MiB measured fastest on an H200:
 *  2 GB/s against 0.9 GB/s with 64 MiB chunks, whose large staging copies in Dawn's writeBuffer do not overlap). */
export const CHUNK_BYTES = 8 << 20;

/** Where the bytes of one tensor live: an open source and the header entry. */
export interface OpenTensor {
  fh: ByteSource;
  info: TensorInfo;
}

/** The default GPU dtype for a file dtype: the format stored as is where the format table has it (F32, F16,
 *  BF16, I32, U32), else the widest of its kind. */
export function defaultGpuDType(d: SafetensorsDType): DType {
  const stored = formatFromSafetensors(d);
  if (stored) return stored;
  switch (d) {
    case 'F64':
    case 'F8_E4M3':
    case 'F8_E5M2':
    case 'F8_E8M0':
      return 'f32';
    case 'I64':
    case 'I16':
    case 'I8':
      return 'i32';
    default:
      return 'u32';
  }
}


/** The shared implementation of `read`, `readF32` and `upload` given a way to find a tensor's bytes. */
export abstract class TensorReaderBase implements SafetensorsReader {
  abstract readonly path: string;
  abstract readonly metadata: Readonly<Record<string, string>>;
  abstract readonly tensors: ReadonlyMap<string, TensorInfo>;
  /** @internal The open handle and header entry of a tensor (throws when missing or closed). */
  abstract locate(name: string): OpenTensor;
  abstract close(): Promise<void>;

  protected missing(name: string): SafetensorsError {
    const names = [...this.tensors.keys()];
    const near = names.filter((n) => n.endsWith(name) || name.endsWith(n)).slice(0, 3);
    return new SafetensorsError(
      `${this.path}: no tensor named '${name}' (${names.length} tensors${near.length ? `; similar: ${near.join(', ')}` : ''})`,
    );
  }

  async readBytes(name: string): Promise<Uint8Array> {
    const { fh, info } = this.locate(name);
    const out = new Uint8Array(info.byteLength);
    await readParallel(fh, info.file, info.byteOffset, out);
    return out;
  }

  async read(name: string): Promise<SafetensorsArray> {
    const { info } = this.locate(name);
    const bytes = await this.readBytes(name);
    return arrayOf(info.dtype, bytes.buffer as ArrayBuffer, 0, info.byteLength / dtypeSize(info.dtype));
  }

  async readF32(name: string): Promise<Float32Array> {
    const { fh, info } = this.locate(name);
    const n = info.byteLength / dtypeSize(info.dtype);
    const out = new Float32Array(n);
    if (info.dtype === 'F32') {
      await readParallel(fh, info.file, info.byteOffset, new Uint8Array(out.buffer));
      return out;
    }
    const size = dtypeSize(info.dtype);
    const chunk = chunkElements(info.dtype, CHUNK_BYTES) * size;
    await streamRange(fh, info.file, info.byteOffset, info.byteLength, chunk, (bytes, off) =>
      decodeToF32(info.dtype, bytes, bytes.byteLength / size, out, off / size),
    );
    return out;
  }

  async upload(ctx: Context, name: string, opts: UploadOptions = {}): Promise<DeviceTensor> {
    const { fh, info } = this.locate(name);
    const target = opts.dtype ?? defaultGpuDType(info.dtype);
    if (!isDType(target)) throw new ConfigError(`upload of '${name}': unknown dtype '${String(target)}' (expected one of ${DTYPES.join(', ')})`);
    const where = `${info.file}: tensor '${name}'`;
    if ((target === 'i32' || target === 'u32') && info.dtype.startsWith('F'))
      throw new SafetensorsError(`${where}: cannot upload a ${info.dtype} tensor as ${target} (choose ${floatNames()})`);
    const chunkBytes = Math.max(8, Math.floor((opts.chunkBytes ?? CHUNK_BYTES) / 8) * 8);
    const n = numel(info.shape);
    const stored = formatFromSafetensors(info.dtype);
    const gpuFloat = (d: DType | null | undefined): d is DType => d === 'f32' || (!!d && isHalf(d));
    if (gpuFloat(stored) && gpuFloat(target) && target !== stored && storageBytes(stored, n) <= ctx.maxBinding && storageBytes(target, n) <= ctx.maxBinding && !opts.cpuConvert) {
      // convert on the GPU: upload as stored, then cast (widening exact, narrowing rounded to nearest even, as the
      // CPU path does). The CPU path converts element by element: bf16 -> f16 took minutes for a 1.1B model (a
      // stall before `rusty finetune --mixed-precision f16` printed anything), and f32 checkpoints loaded in 16 bits
      // went the same way
      const asStored = await this.upload(ctx, name, { dtype: stored, chunkBytes });
      try {
        return cast(ctx, asStored, target);
      } finally {
        release(ctx, asStored);
      }
    }
    const t = empty(ctx, info.shape, target);
    try {
      const size = dtypeSize(info.dtype);
      if (stored === target) {
        await streamRange(fh, info.file, info.byteOffset, info.byteLength, chunkBytes, (bytes, off) => ctx.write(t.buffer, bytes, off));
      } else {
        const outSize = formatOf(target).bits / 8;
        const chunk = chunkElements(info.dtype, chunkBytes) * size;
        const scratch = new ArrayBuffer((chunk / size) * outSize);
        await streamRange(fh, info.file, info.byteOffset, info.byteLength, chunk, (bytes, off) => {
          const n = bytes.byteLength / size;
          const start = off / size;
          let out: Uint8Array;
          if (target === 'f32') {
            const o = new Float32Array(scratch, 0, n);
            decodeToF32(info.dtype, bytes, n, o);
            out = new Uint8Array(scratch, 0, n * 4);
          } else if (target === 'f16' || target === 'bf16') {
            const o = new Uint16Array(scratch, 0, n);
            encodeHalf(target, info.dtype, bytes, n, o);
            out = new Uint8Array(scratch, 0, n * 2);
          } else {
            const o = target === 'i32' ? new Int32Array(scratch, 0, n) : new Uint32Array(scratch, 0, n);
            encodeInt32(target, info.dtype, bytes, n, o, 0, where);
            out = new Uint8Array(scratch, 0, n * 4);
          }
          ctx.write(t.buffer, out, start * outSize);
        });
      }
    } catch (e) {
      ctx.release(t.buffer);
      throw e;
    }
    return t;
  }
}

/** One open safetensors file: header parsed and validated, data read on demand. */
export class SafetensorsFile extends TensorReaderBase {
  private fh: ByteSource | null;

  /** @internal use `readSafetensors` */
  constructor(
    readonly path: string,
    fh: ByteSource,
    readonly metadata: Readonly<Record<string, string>>,
    readonly tensors: ReadonlyMap<string, TensorInfo>,
    /** Size of the file in bytes. */
    readonly fileSize: number,
  ) {
    super();
    this.fh = fh;
  }

  locate(name: string): OpenTensor {
    if (!this.fh) throw new SafetensorsError(`${this.path}: the file was closed`);
    const info = this.tensors.get(name);
    if (!info) throw this.missing(name);
    return { fh: this.fh, info };
  }

  /** Number of elements of every tensor together. */
  get parameters(): number {
    let n = 0;
    for (const t of this.tensors.values()) n += numel(t.shape);
    return n;
  }

  async close(): Promise<void> {
    const fh = this.fh;
    this.fh = null;
    await fh?.close();
  }
}

/**
 * Open a safetensors file and validate its header (length, UTF-8 JSON, dtypes, shapes, offsets that tile the
 * data exactly). Tensor data is read later, one tensor at a time at its offset; files over 4 GB work.
 * @param file a path (Node), a `ByteSource` (see `@rusty/loader`'s io: OPFS, memory), or a browser `File`/`Blob`
 * @throws SafetensorsError naming the file and the problem
 */
export async function readSafetensors(file: string | ByteSource | BlobLike): Promise<SafetensorsFile> {
  let fh: ByteSource;
  if (typeof file !== 'string') fh = isByteSource(file) && !isBlobLike(file) ? file : blobSource(file as BlobLike);
  else {
    const { openFile } = await import('../io/node');
    try {
      fh = await openFile(file);
    } catch (e) {
      const code = (e as { code?: string }).code;
      const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a directory (use openCheckpoint for a directory)' : (e as Error).message;
      throw new SafetensorsError(`${file}: cannot open: ${why}`, { cause: e });
    }
  }
  const path = fh.name;
  try {
    const size = fh.size;
    if (!Number.isSafeInteger(size)) throw new SafetensorsError(`${path}: file size ${size} is not supported`);
    const prefix = new Uint8Array(8);
    if (size >= 8) await readExactly(fh, path, 0, prefix);
    const n = headerLength(path, size, prefix);
    const header = new Uint8Array(n);
    await readExactly(fh, path, 8, header);
    const { metadata, tensors } = parseHeader(path, header, 8 + n, size - 8 - n);
    return new SafetensorsFile(path, fh, metadata, tensors, size);
  } catch (e) {
    await fh.close().catch(() => undefined);
    throw e;
  }
}
