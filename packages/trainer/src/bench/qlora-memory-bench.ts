/**
 * QLoRA memory accounting (issue 14): what is alive at the peak of a LoRA fine-tuning step on a bf16 base and
 * on an NF4 base, with and without gradient checkpointing. A program, not a test; prints ONE JSON object.
 *
 * Each run is what `rusty finetune --targets all --r 16 --alpha 32 --mixed-precision bf16 [--quantize nf4]
 * [--gradient-checkpointing]` does after loading: a Llama model with bf16 weights (NF4 with double-quantized
 * scales, blocks of 64, for the seven projections of every layer; embedding, norms and LM head stay bf16), LoRA
 * on all seven projections, AdamW, the Trainer with `mixedPrecision: 'bf16'` (f16 compute, loss scaling) and
 * gradient clipping at 1 (as a LoRA run's `fit` does, the LM head is held in f16 and the token embedding on the host
 * during the run). The peak is the pool's allocated peak from the first step on (`ctx.memory.peak`, what the CLI's
 * summary reports), in a GPU context of its own per run; `peakByOpGiB` gives the highest live bytes reached inside
 * each op (the runners-up of the peak).
 *
 * Accounting: the bench wraps the context's buffer pool (acquire / release) and every registered autograd op
 * (forward / backward) so that each buffer carries the op that allocated it ("swiglu.fwd", "lora-linear.bwd",
 * "recompute: ..." inside a checkpointed layer's backward) or, outside ops, the first frame of the stack in the
 * packages; when `live` reaches a new peak the live buffers are snapshotted. Buffers of the model's parameters,
 * their gradients and everything alive before the first step are named as such.
 *
 * With `--layers a,b` each run is made at both depths and every category is extrapolated linearly to
 * `--extrapolate N` layers (peak(N) = peak(a) + (N - a) (peak(b) - peak(a)) / (b - a)): for real (not `--dry`) runs
 * of a layer shape too large to run in full. Only an estimate: the pool's reuse, and which of two near-equal peaks
 * wins, change with depth (at the 1.1B shape 1- and 2-layer runs put the 22-layer peak up to 1% off).
 *
 * From the repository root (the bundle goes under packages/backend/ so that Node finds the `webgpu` package; the
 * aliases take the workspace packages from their sources, not their dist/; source maps name the allocation sites):
 *   a=; for p in backend autograd graph loader trainer; do a="$a --alias:@rusty/$p=./packages/$p/src/index.ts"; done
 *   node_modules/.bin/esbuild packages/trainer/src/bench/qlora-memory-bench.ts --bundle --platform=node --format=esm \
 *     --external:webgpu --loader:.wgsl=text --sourcemap $a --outfile=packages/backend/dist/qlora-memory-bench.mjs
 *   node --enable-source-maps packages/backend/dist/qlora-memory-bench.mjs --dry [flags]
 *
 * `--dry`: kernels are not dispatched and weights not initialised (allocations only), so all 22 layers of the 1.1B
 * shape run on a CPU adapter in seconds; the accounting equals a real run's (checked on `--quick` and at hidden 512:
 * the same peak and held bytes with and without `--dry`).
 *
 * Flags: --hidden --inter --heads --kv --vocab --batch --seq (default: the 1.1B shape, TinyLlama: 2048, 5632, 32,
 * 4, 32000, 4, 512), --layers a[,b] (default 22 with --dry, else 1,2), --extrapolate N (default 22), --steps N (default 2),
 * --runs bf16,nf4,bf16-ckpt,nf4-ckpt, --top N (largest categories listed, default 25), --quick (a tiny shape).
 */
import { createContext, quantSpec, type Context, type GpuBuffer } from '@rusty/backend';
import { AdamW, getOp, registeredOps } from '@rusty/autograd';
import { applyLora, CausalLM, packQuantized, parseModelConfig, quantizedLinears, quantizeLinears } from '@rusty/graph';
import { DataLoader, Rng, TextDataset, Trainer } from '../index';

const argv = process.argv.slice(2);
const val = (n: string): string | undefined => (argv.includes(n) ? argv[argv.indexOf(n) + 1] : undefined);
const num = (n: string, d: number): number => Number(val(n) ?? d);
const quick = argv.includes('--quick');
const shape = quick
  ? { hidden: 128, inter: 352, heads: 4, kv: 2, vocab: 512, batch: 2, seq: 64 }
  : { hidden: num('--hidden', 2048), inter: num('--inter', 5632), heads: num('--heads', 32), kv: num('--kv', 4), vocab: num('--vocab', 32000), batch: num('--batch', 4), seq: num('--seq', 512) };
const depths = (val('--layers') ?? (argv.includes('--dry') ? '22' : '1,2')).split(',').map(Number);
const target = num('--extrapolate', 22);
const steps = num('--steps', 2);
const top = num('--top', 25);
const runs = (val('--runs') ?? 'bf16,nf4,bf16-ckpt,nf4-ckpt').split(',');
const dry = argv.includes('--dry');
const R = 16;
// deep enough to see a checkpointed layer's recomputation under the op frames
Error.stackTraceLimit = 60;
const TARGETS = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'];

// ---- allocation tags -------------------------------------------------------------------------------------------

const opStack: string[] = [];
/** Whether the run checkpoints its layers (then allocations are checked for a recomputation). */
let checkpointed = false;

/** Wrap every registered op's forward and backward so allocations inside know their op. */
function tagOps(): void {
  for (const name of registeredOps()) {
    const def = getOp(name)! as { forward: (...a: unknown[]) => unknown; backward?: (...a: unknown[]) => unknown; tagged?: boolean };
    if (def.tagged) continue;
    def.tagged = true;
    const f = def.forward;
    def.forward = (...a) => {
      opStack.push(`${name}.fwd`);
      try {
        return f(...a);
      } finally {
        opStack.pop();
      }
    };
    const b = def.backward;
    if (b)
      def.backward = (...a) => {
        opStack.push(`${name}.bwd`);
        try {
          return b(...a);
        } finally {
          opStack.pop();
        }
      };
  }
}

/** The first stack frame in the packages outside autograd's plumbing (for allocations outside ops). */
function siteOf(): string {
  const lines = (new Error().stack ?? '').split('\n').slice(3);
  for (const l of lines) {
    const m = /at (?:(\S+) )?\(?.*?packages\/(\w+)\/src\/(.+?\.ts):(\d+)/.exec(l) ?? /at (\S+) \(.*?qlora-memory-bench/.exec(l);
    if (!m) continue;
    if (m[3] && /^(tensor|op|storage|scope|context|buffer-pool|sub-buffer)\.ts$/.test(m[3])) continue;
    if (m[3] && /bench\//.test(m[3])) continue;
    return m[3] ? `${m[2]}/${m[3]} ${m[1] ?? ''}`.trim() : `bench ${m[1]}`;
  }
  return 'other';
}

interface Alloc {
  tag: string;
  bytes: number;
}

interface Snapshot {
  live: number;
  /** The op stack (outermost first) of the allocation that reached the peak. */
  at: string;
  buffers: [GpuBuffer, Alloc][];
}

/** Wrap the context's buffer pool: a tag per live buffer, and the live set at the highest peak. */
function instrument(ctx: Context): {
  live: Map<GpuBuffer, Alloc>;
  peak: () => Snapshot | null;
  held: () => Snapshot | null;
  /** The highest live bytes reached by an allocation of each tag (the runners-up of the peak, by op). */
  byTag: Map<string, number>;
  reset: () => void;
} {
  const pool = (ctx as unknown as { pool: { acquire(b: number): GpuBuffer; release(b: GpuBuffer): void; trim(): void; stats: { live: number; pooled: number } } })
    .pool;
  const live = new Map<GpuBuffer, Alloc>();
  /** Released buffers the pool keeps, with the tag of their last allocation. */
  const pooled = new Map<GpuBuffer, Alloc>();
  let best: Snapshot | null = null;
  let bestHeld: Snapshot | null = null;
  let armed = false;
  const byTag = new Map<string, number>();
  const acquire = pool.acquire.bind(pool);
  const release = pool.release.bind(pool);
  const trim = pool.trim.bind(pool);
  pool.trim = () => {
    trim();
    pooled.clear();
  };
  pool.acquire = (bytes: number) => {
    const b = acquire(bytes);
    pooled.delete(b);
    const op = opStack[opStack.length - 1];
    // a checkpointed layer's forward run again in backward (the checkpoint node is no registered op: its frame,
    // under the backward engine's)
    const stack = op !== undefined && op.endsWith('.fwd') && checkpointed ? (new Error().stack ?? '') : '';
    const inRecompute = stack.includes('autograd/src/checkpoint.ts') && stack.includes('autograd/src/engine.ts');
    const tag = (inRecompute ? 'recompute: ' : '') + (op ?? siteOf());
    live.set(b, { tag, bytes: b.size });
    if (armed && pool.stats.live > (byTag.get(tag) ?? 0)) byTag.set(tag, pool.stats.live);
    if (armed && pool.stats.live > (best?.live ?? 0)) best = { live: pool.stats.live, at: [...opStack.slice(0, -1), tag].join(' > '), buffers: [...live] };
    if (armed && pool.stats.live + pool.stats.pooled > (bestHeld?.live ?? 0))
      bestHeld = { live: pool.stats.live + pool.stats.pooled, at: [...opStack.slice(0, -1), tag].join(' > '), buffers: [...pooled] };
    return b;
  };
  pool.release = (b: GpuBuffer) => {
    const a = live.get(b);
    live.delete(b);
    const before = pool.stats.pooled;
    release(b);
    if (a && pool.stats.pooled > before) pooled.set(b, a); // kept (not destroyed)
  };
  return {
    live,
    peak: () => best,
    held: () => bestHeld,
    byTag,
    reset: () => {
      armed = true;
      byTag.clear();
      best = { live: pool.stats.live, at: 'before the steps', buffers: [...live] };
    },
  };
}

// ---- one run ---------------------------------------------------------------------------------------------------

interface RunResult {
  layers: number;
  peakBytes: number;
  peakReservedBytes: number;
  peakAt: string;
  /** The largest buffers alive at the peak, allocated during the steps: [tag, MiB]. */
  largest: [string, number][];
  /** Bytes the pool kept unused at the peak of allocated + pooled, by the op that last allocated them. */
  pooledAtHeld: Record<string, number>;
  /** The highest live bytes reached inside each op (by allocation tag), highest first. */
  peakByOp: [string, number][];
  /** Bytes by category at the allocated peak. */
  categories: Record<string, { bytes: number; buffers: number }>;
  loss: number;
}

const rootOf = (b: GpuBuffer): GpuBuffer => (b as GpuBuffer & { root?: GpuBuffer }).root ?? b;

async function runOne(run: string, layers: number): Promise<RunResult> {
  const nf4 = run.startsWith('nf4');
  const ckpt = run.endsWith('-ckpt');
  checkpointed = ckpt;
  const ctx = await createContext();
  tagOps();
  const acct = instrument(ctx);
  if (dry) {
    // allocation only: every op runs and allocates as usual, the kernels are not dispatched (the pool sees the same
    // requests)
    (ctx as { dispatch: Context['dispatch'] }).dispatch = () => {};
    // and read-backs see zeros (not what a reused buffer last held): finite losses, no weight beyond f16's range
    (ctx as { read: Context['read'] }).read = async (_b, byteLength = 4) => new ArrayBuffer(Math.ceil(byteLength / 4) * 4);
  }
  const config = parseModelConfig({
    model_type: 'llama',
    vocab_size: shape.vocab,
    hidden_size: shape.hidden,
    intermediate_size: shape.inter,
    num_hidden_layers: layers,
    num_attention_heads: shape.heads,
    num_key_value_heads: shape.kv,
    max_position_embeddings: Math.max(2048, shape.seq),
    rms_norm_eps: 1e-5,
  });
  // --dry: weights left uninitialised (their values are never used; 22 layers of host-side random init take minutes)
  const model = new CausalLM(ctx, config, { dtype: 'bf16', seed: 3, gradientCheckpointing: ckpt, empty: dry });
  // as the loader's quantize-at-load: the quantized layers packed into arenas (packQuantized)
  if (nf4) quantizeLinears(model, quantSpec('nf4', 64, true));
  if (nf4) await packQuantized(ctx, [...quantizedLinears(model).values()]);
  applyLora(model, { r: R, alpha: 2 * R, targetModules: TARGETS, seed: 2 });
  // the pool is emptied (the CLI loads into 4-byte placeholders and quantizes as the weights stream in: no dense
  // copies are left over)
  await ctx.sync();
  ctx.trimPool();
  const rng = new Rng(7);
  const n = (steps + 1) * shape.batch * shape.seq;
  const ids = Int32Array.from({ length: n }, () => rng.int(shape.vocab));
  const data = new DataLoader(TextDataset.fromSequences([ids], { seqLen: shape.seq, dropRemainder: true }), shape.batch, { shuffle: false });
  const params = model.trainableParameters().map(([, p]) => p);
  const opt = new AdamW(ctx, params, { lr: 1e-4, weightDecay: 0 });
  let loss = NaN;
  // parameter buffers by name, taken during the run too: the Trainer stores a frozen bf16 LM head in f16 for the
  // run (f16OperandsForRun) and puts the bf16 one back at the end
  const names = new Map<GpuBuffer, string>();
  const nameParams = () => {
    for (const [name, p] of model.namedParameters()) {
      const what = p.requiresGrad ? 'LoRA A/B (f32)' : /layers\.\d+\.(self_attn|mlp)\./.test(name) ? (nf4 ? 'projection weights (NF4 codes)' : 'projection weights (bf16)') : 'embedding (host during the run), norms, LM head (f16 during the run)';
      names.set(rootOf(p.data.buffer), what);
      if (p.grad) names.set(rootOf(p.grad.data.buffer), 'LoRA gradients (f32)');
    }
  };
  const trainer = new Trainer({
    model,
    optimizer: opt,
    data,
    maxSteps: steps,
    maxGradNorm: 1,
    mixedPrecision: 'bf16',
    signals: false,
    progress: false,
    callbacks: {
      onStep: (m) => {
        loss = m.loss;
        nameParams();
      },
    },
  });
  await ctx.sync();
  ctx.resetPeak();
  acct.reset();
  // allocation records (not buffers: the pool hands a released buffer out again) alive before the first step
  const before = new Set(acct.live.values());
  await trainer.fit();
  await ctx.sync();
  const mem = ctx.memory;
  // name the buffers of parameters and gradients
  nameParams();
  const categories: RunResult['categories'] = {};
  const largest: [string, number][] = [];
  const snap = acct.peak()!;
  for (const [b, a] of snap.buffers) {
    const tag = names.get(b) ?? (before.has(a) ? (nf4 && a.tag.includes('quant') ? 'NF4 scales' : `before the steps: ${a.tag}`) : a.tag);
    const c = (categories[tag] ??= { bytes: 0, buffers: 0 });
    c.bytes += a.bytes;
    c.buffers++;
    if (!before.has(a) && !names.has(b)) largest.push([tag, +(a.bytes / 2 ** 20).toFixed(2)]);
  }
  largest.sort((x, y) => y[1] - x[1]);
  largest.splice(top);
  // what the pool kept unused at the peak of live + pooled: by the op that last allocated each buffer
  const pooledAtHeld: Record<string, number> = {};
  for (const [, a] of acct.held()?.buffers ?? []) pooledAtHeld[a.tag] = (pooledAtHeld[a.tag] ?? 0) + a.bytes;
  const peakByOp = [...acct.byTag].sort((x, y) => y[1] - x[1]).slice(0, top);
  const out: RunResult = { layers, peakBytes: mem.peak, peakReservedBytes: mem.peakReserved, peakAt: snap.at, largest, pooledAtHeld, peakByOp, categories, loss };
  if (Math.abs(snap.live - mem.peak) > 0) process.stderr.write(`qlora-memory-bench: snapshot ${snap.live} != peak ${mem.peak}\n`);
  trainer.dispose();
  opt.dispose();
  model.dispose();
  ctx.destroy();
  return out;
}

const GIB = 1024 ** 3;
const gib = (b: number): number => +(b / GIB).toFixed(4);

function extrapolate(a: RunResult, b: RunResult, n: number): { peakBytes: number; peakReservedBytes: number; categories: Record<string, number> } {
  const f = (x: number, y: number): number => x + ((n - a.layers) * (y - x)) / (b.layers - a.layers);
  const cats: Record<string, number> = {};
  for (const k of new Set([...Object.keys(a.categories), ...Object.keys(b.categories)])) cats[k] = f(a.categories[k]?.bytes ?? 0, b.categories[k]?.bytes ?? 0);
  return { peakBytes: f(a.peakBytes, b.peakBytes), peakReservedBytes: f(a.peakReservedBytes, b.peakReservedBytes), categories: cats };
}

const sortCats = (c: Record<string, number>): Record<string, number> =>
  Object.fromEntries(
    Object.entries(c)
      .filter(([, v]) => Math.abs(v) >= 1 << 20)
      .sort((x, y) => y[1] - x[1])
      .slice(0, top)
      .map(([k, v]) => [k, gib(v)]),
  );

const ctx0 = await createContext();
const adapter = `${ctx0.info.vendor} ${ctx0.info.architecture} ${ctx0.info.description}`.trim();
ctx0.destroy();
const results: Record<string, unknown> = {};
const peaks: Record<string, number> = {};
for (const run of runs) {
  const rs: RunResult[] = [];
  for (const l of depths) {
    const t0 = performance.now();
    const r = await runOne(run, l);
    process.stderr.write(`qlora-memory-bench: ${run} layers ${l}: peak ${gib(r.peakBytes)} GiB (${((performance.now() - t0) / 1000).toFixed(0)} s)\n`);
    rs.push(r);
  }
  const measured = rs.map((r) => ({
    layers: r.layers,
    peakBytes: r.peakBytes,
    peakGiB: gib(r.peakBytes),
    heldGiB: gib(r.peakReservedBytes),
    peakAt: r.peakAt,
    loss: r.loss,
    peakByOpGiB: r.peakByOp.map(([k, v]) => [k, gib(v)]),
    largestMiB: r.largest,
    pooledAtHeldPeakGiB: sortCats(r.pooledAtHeld),
    atPeakGiB: sortCats(Object.fromEntries(Object.entries(r.categories).map(([k, v]) => [k, v.bytes]))),
  }));
  const entry: Record<string, unknown> = { measured };
  if (rs.length >= 2) {
    const e = extrapolate(rs[0]!, rs[rs.length - 1]!, target);
    entry[`at${target}Layers`] = { peakGiB: gib(e.peakBytes), heldGiB: gib(e.peakReservedBytes), atPeakGiB: sortCats(e.categories) };
    peaks[run] = e.peakBytes;
  } else peaks[run] = rs[0]!.peakBytes;
  results[run] = entry;
}
const ratios: Record<string, number> = {};
for (const run of runs)
  if (run.startsWith('nf4') && peaks[`bf16${run.slice(3)}`]) ratios[`${run}/bf16${run.slice(3)}`] = +(peaks[run]! / peaks[`bf16${run.slice(3)}`]!).toFixed(3);
console.log(JSON.stringify({ bench: 'qlora-memory', adapter, shape: { ...shape, layers: depths, extrapolatedTo: target, loraR: R }, steps, dry, runs: results, peakRatios: ratios }, null, 1));
