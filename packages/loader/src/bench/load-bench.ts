/**
 * Checkpoint loading benchmark: writes a safetensors file of `--size-mb` MiB (default 1024) in the system's
 * temporary directory (a mix of BF16 and F32 tensors of a Llama-like shape), then times
 *   - write:        writeSafetensors (fsync'd, atomic rename),
 *   - read:         reading every tensor's bytes from disk into host memory (readBytes),
 *   - read_f32:     the same as f32 arrays (readF32: bf16 -> f32 conversion on the CPU),
 *   - upload:       streaming every tensor into GPU memory in its own dtype (st.upload, then ctx.sync()),
 *   - upload_f32:   the same, converting every tensor to f32 on the way (bf16 -> f32 on the CPU),
 * and prints ONE JSON object with GB/s (10^9 bytes of file data per second). The file is deleted afterwards.
 * The file was just written, so "read" measures the page cache unless the OS evicted it; `--drop-caches`
 * tries to evict it first (needs root).
 *
 * Also `gpu_write_GBps`: host memory to GPU alone (ctx.write of chunks from memory), to separate the disk from the
 * GPU path.
 *
 *   node load-bench.js [--size-mb 1024] [--tensor-mb 32] [--chunk-mb 8] [--reps 1] [--drop-caches]
 */
import { rmSync, writeFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createContext, empty, release, type DeviceTensor } from '@rusty/backend';
import { readSafetensors, writeSafetensors, type TensorToWrite } from '../safetensors';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : fallback;
  if (!Number.isFinite(v) || v <= 0) throw new Error(`--${name} must be a positive number`);
  return v;
}

const sizeMB = arg('size-mb', 1024);
const tensorMB = Math.min(arg('tensor-mb', 32), sizeMB);
const reps = arg('reps', 1);
const chunkMB = arg('chunk-mb', 8);
const dropCaches = process.argv.includes('--drop-caches');

function tryDropCaches(): boolean {
  if (!dropCaches) return false;
  try {
    writeFileSync('/proc/sys/vm/drop_caches', '3');
    return true;
  } catch {
    return false;
  }
}

const MiB = 1 << 20;
const GB = 1e9;

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'rusty-load-bench-'));
  const path = join(dir, 'model.safetensors');
  try {
    // tensors: alternate BF16 [rows, 2048] and F32 [rows, 1024] blocks of tensorMB each, until sizeMB
    const tensors: Record<string, TensorToWrite> = {};
    let bytes = 0;
    let k = 0;
    const pattern = new Uint8Array(tensorMB * MiB);
    for (let i = 0; i < pattern.length; i++) pattern[i] = (i * 2654435761) >>> 24;
    while (bytes < sizeMB * MiB) {
      const left = sizeMB * MiB - bytes;
      const size = Math.min(tensorMB * MiB, left) - (Math.min(tensorMB * MiB, left) % 8);
      if (size <= 0) break;
      const bf16 = k % 2 === 0;
      const cols = bf16 ? 2048 : 1024;
      const rowBytes = cols * (bf16 ? 2 : 4);
      const rows = Math.max(1, Math.floor(size / rowBytes));
      const shape = size >= rowBytes ? [rows, cols] : [size / (bf16 ? 2 : 4)];
      const n = shape.reduce((a, b) => a * b, 1) * (bf16 ? 2 : 4);
      tensors[`model.layers.${Math.floor(k / 2)}.${bf16 ? 'mlp.weight' : 'attn.weight'}`] = {
        dtype: bf16 ? 'BF16' : 'F32',
        shape,
        data: pattern.subarray(0, n),
      };
      bytes += n;
      k++;
    }

    let t0 = performance.now();
    const written = await writeSafetensors(path, tensors, { format: 'pt' });
    const writeS = (performance.now() - t0) / 1e3;

    const ctx = await createContext();
    const result: Record<string, unknown> = {
      bench: 'load',
      device: ctx.info.description || ctx.info.device || ctx.info.vendor,
      software_adapter: ctx.info.isSoftware,
      file_bytes: written.byteLength,
      tensor_bytes: bytes,
      tensors: k,
      tensor_mb: tensorMB,
      write_GBps: +(written.byteLength / writeS / GB).toFixed(3),
    };
    const st = await readSafetensors(path);
    const names = [...st.tensors.keys()];
    const best = { read: Infinity, read_f32: Infinity, upload: Infinity, upload_f32: Infinity, gpu_write: Infinity };
    let dropped = false;
    for (let r = 0; r < reps; r++) {
      dropped = tryDropCaches() || dropped;
      t0 = performance.now();
      let check = 0;
      for (const name of names) check += (await st.readBytes(name)).byteLength;
      if (check !== bytes) throw new Error(`read ${check} bytes, expected ${bytes}`);
      best.read = Math.min(best.read, (performance.now() - t0) / 1e3);
      tryDropCaches();
      t0 = performance.now();
      for (const name of names) await st.readF32(name);
      best.read_f32 = Math.min(best.read_f32, (performance.now() - t0) / 1e3);

      for (const mode of ['upload', 'upload_f32'] as const) {
        tryDropCaches();
        ctx.resetPeak();
        const live: DeviceTensor[] = [];
        t0 = performance.now();
        const chunkBytes = chunkMB * MiB;
        for (const name of names) live.push(await st.upload(ctx, name, mode === 'upload_f32' ? { dtype: 'f32', chunkBytes } : { chunkBytes }));
        await ctx.sync();
        best[mode] = Math.min(best[mode], (performance.now() - t0) / 1e3);
        result[`${mode}_gpu_peak_bytes`] = ctx.memory.peak;
        release(ctx, ...live);
        ctx.trimPool();
      }
    }
    // host memory -> GPU only: the same bytes in chunks from one host buffer
    const chunk = new Uint8Array(chunkMB * MiB).fill(7);
    for (let r = 0; r < reps; r++) {
      const live: DeviceTensor[] = [];
      t0 = performance.now();
      for (const info of st.tensors.values()) {
        const t = empty(ctx, [info.byteLength / 4], 'f32');
        for (let off = 0; off < info.byteLength; off += chunk.byteLength)
          ctx.write(t.buffer, chunk.subarray(0, Math.min(chunk.byteLength, info.byteLength - off)), off);
        live.push(t);
      }
      await ctx.sync();
      best.gpu_write = Math.min(best.gpu_write, (performance.now() - t0) / 1e3);
      release(ctx, ...live);
      ctx.trimPool();
    }
    await st.close();
    result.gpu_write_GBps = +(bytes / best.gpu_write / GB).toFixed(3);
    result.chunk_mb = chunkMB;
    result.read_GBps = +(bytes / best.read / GB).toFixed(3);
    result.read_f32_GBps = +(bytes / best.read_f32 / GB).toFixed(3);
    result.upload_GBps = +(bytes / best.upload / GB).toFixed(3);
    result.upload_f32_GBps = +(bytes / best.upload_f32 / GB).toFixed(3);
    result.page_cache_dropped = dropped;
    result.seconds = { write: +writeS.toFixed(3), read: +best.read.toFixed(3), read_f32: +best.read_f32.toFixed(3), upload: +best.upload.toFixed(3), upload_f32: +best.upload_f32.toFixed(3) };
    ctx.destroy();
    console.log(JSON.stringify(result));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exitCode = 1;
});
