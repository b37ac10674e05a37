// The playground page: wires the cards (model, data, options, progress, generate, download) to the engine,
// keeps checkpoints in OPFS and shows every failure as a one-line typed message. `window.rustyPlayground`
// exposes the state and the model's logits to the browser test.
import { ConfigError, type Context } from '@rusty/backend';
import { applyLora, loraModules, parseLlamaConfig, type LlamaConfig } from '@rusty/graph';
import { loadPretrained, memoryTree, pickedFilesTree, saveLoraAdapter, TokenizerError, type PickedFile, type Tokenizer } from '@rusty/loader';
import corpus from './corpus.txt?raw';
import { drawLossCurve } from './chart';
import { buildWindows, type Windows } from './data';
import { builtinModel, checkFits, generateText, logitsOf, modelSize, openGpu, Optimisation, restoreTrainable, trainableState, type LoopOptions, type Model } from './engine';
import { describeError } from './errors';
import { FINETUNE_DEFAULTS, resolveTargets, TINY_PRESET } from './options';
import { offer, modelFiles } from './downloads';
import { applyOptions, buildOptionsForm, readOptions } from './options-form';
import { clearRun, loadCheckpoint, loadData, loadRun, saveRun, storageAvailable, type SavedRun } from './store';
import './style.css';

const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;
/** Checkpoint every this many steps (a reload or a closed tab loses at most this many). */
const SAVE_EVERY = 20;

type State = 'starting' | 'no-gpu' | 'idle' | 'loading' | 'loaded' | 'training' | 'stopped' | 'done' | 'generating';

interface Session {
  kind: 'pretrain' | 'finetune';
  model: Model;
  config: LlamaConfig;
  tokenizer: Tokenizer | null;
  name: string;
  files: [string, number][];
  /** The sample before training (pretraining), for the "before" pane. */
  before?: string;
}

interface Run {
  kind: 'pretrain' | 'finetune';
  opt: Optimisation;
  data: Windows;
  dataText: string;
  dataName: string;
  loop: LoopOptions;
  lora?: SavedRun['lora'];
  step: number;
  losses: [number, number][];
  stop: boolean;
  tokens: number;
  seconds: number;
  /** Steps timed for tokens/s (the first step, which compiles the kernels, is left out). */
  timed: number;
}

let ctx: Context | null = null;
let session: Session | null = null;
let run: Run | null = null;
let state: State = 'starting';
let lastGenerated: { prompt: number[]; before: number[]; after: number[] } | null = null;

function setState(s: State, status?: string): void {
  state = s;
  document.body.dataset.state = s;
  if (status !== undefined) $('status').textContent = status;
  const busy = s === 'training' || s === 'loading' || s === 'generating' || s === 'starting' || s === 'no-gpu';
  $<HTMLButtonElement>('pretrain').disabled = busy;
  $<HTMLButtonElement>('start').disabled = busy || session?.kind !== 'finetune' || !session.tokenizer || (!!run && run.kind === 'finetune');
  $<HTMLButtonElement>('stop').disabled = s !== 'training';
  $<HTMLButtonElement>('continue').disabled = s !== 'stopped' || !run;
  $<HTMLButtonElement>('generate').disabled = busy || !session?.tokenizer;
  const trainedLora = !!session && session.kind === 'finetune' && loraModules(session.model).size > 0 && !!run && run.step > 0;
  $<HTMLButtonElement>('export-adapter').disabled = busy || !trainedLora;
  $<HTMLButtonElement>('export-merged').disabled = busy || !trainedLora;
  $<HTMLButtonElement>('export-model').disabled = busy || session?.kind !== 'pretrain' || !run || run.step === 0;
  for (const id of ['pick-dir', 'pick-files']) $<HTMLInputElement>(id).disabled = busy;
}

function showError(e: unknown): void {
  const { kind, message } = describeError(e);
  $('error-kind').textContent = `${kind}:`;
  $('error-message').textContent = message;
  $('error').hidden = false;
  console.error(e);
}

const fmt = (n: number): string => (n >= 1e9 ? `${(n / 1e9).toFixed(2)}B` : n >= 1e6 ? `${(n / 1e6).toFixed(2)}M` : n >= 1e3 ? `${(n / 1e3).toFixed(1)}k` : String(n));
const fmtTime = (s: number): string => (!Number.isFinite(s) ? '–' : s < 60 ? `${s.toFixed(0)}s` : `${Math.floor(s / 60)}m${String(Math.round(s % 60)).padStart(2, '0')}s`);

// ---- model card ----

function showModelInfo(s: Session): void {
  const c = s.config;
  const size = modelSize(s.model);
  const rows: [string, string][] = [
    ['model', s.name],
    ['architecture', `${c.modelType ?? 'llama'} · ${c.numHiddenLayers} layers · hidden ${c.hiddenSize} · ${c.numAttentionHeads} heads (${c.numKeyValueHeads} kv)`],
    ['vocabulary', fmt(c.vocabSize)],
    ['parameters', `${fmt(size.params)} (${(size.bytes / 2 ** 20).toFixed(1)} MiB on the GPU)`],
    ['trainable', `${fmt(size.trainable)}${size.trainable && size.trainable < size.params ? ` (${((100 * size.trainable) / size.params).toFixed(2)}%)` : ''}`],
    ['tokenizer', s.tokenizer ? `${fmt(s.tokenizer.vocabSize)} ids` : 'none: add a tokenizer.json to fine-tune or generate'],
  ];
  const dl = $('model-info');
  dl.replaceChildren(...rows.flatMap(([k, v]) => [Object.assign(document.createElement('dt'), { textContent: k }), Object.assign(document.createElement('dd'), { textContent: v })]));
  dl.hidden = false;
}

function dropSession(): void {
  run?.opt.dispose();
  run = null;
  session?.model.dispose();
  session = null;
  drawLossCurve($('chart') as unknown as SVGSVGElement, [], 1);
  for (const id of ['stat-step', 'stat-loss', 'stat-rate', 'stat-eta', 'stat-elapsed', 'stat-lr']) $(id).textContent = '–';
  $('bar-fill').style.width = '0';
  $('before').textContent = '';
  $('after').textContent = '';
  $('downloads').replaceChildren();
}

async function loadOwnModel(files: PickedFile[]): Promise<void> {
  if (!ctx || !files.length) return;
  dropSession();
  setState('loading', `Reading ${files.length} files…`);
  try {
    const tree = pickedFilesTree(files.filter((f) => !/(^|\/)\.[^/]*$/.test(f.webkitRelativePath || f.name)));
    if (!(await tree.has('config.json'))) throw new ConfigError(`${tree.name}: no config.json (an HF model directory needs one; pick the folder, or config.json with the .safetensors files)`);
    const config = parseLlamaConfig(await tree.readText('config.json'), tree.pathOf('config.json'));
    const o = readOptions();
    checkFits(ctx, config, o.batchSize, Math.min(o.seqLen, config.maxPositionEmbeddings), tree.name);
    setState('loading', `Loading ${tree.name} onto the GPU…`);
    const t0 = performance.now();
    const loaded = await loadPretrained(ctx, tree, { requiresGrad: false });
    const tokenizer = loaded.tokenizer;
    if (tokenizer && tokenizer.vocabSize > config.vocabSize)
      throw new TokenizerError(`${tree.pathOf('tokenizer.json')}: ${tokenizer.vocabSize} ids, more than the model's vocab_size ${config.vocabSize}`);
    session = {
      kind: 'finetune',
      model: loaded.model,
      config: loaded.config,
      tokenizer,
      name: tree.name,
      files: [...tree.files].map(([n, f]) => [n, f.size] as [string, number]).sort(),
    };
    showModelInfo(session);
    setState('loaded', `Loaded ${tree.name} in ${((performance.now() - t0) / 1000).toFixed(1)} s.${tokenizer ? ' Add data and start fine-tuning.' : ' No tokenizer.json: pick one with the model files to fine-tune.'}`);
    const saved = await loadRun();
    if (saved?.kind === 'finetune') offerResume(saved);
  } catch (e) {
    dropSession();
    showError(e);
    setState('idle', 'Loading failed: see the message above.');
  }
}

// ---- training ----

function updateStats(r: Run, total: number): void {
  const last = r.losses.at(-1);
  $('stat-step').textContent = `${r.step} / ${total}`;
  $('stat-loss').textContent = last ? last[1].toFixed(3) : '–';
  const rate = r.seconds > 0 ? r.tokens / r.seconds : NaN;
  $('stat-rate').textContent = Number.isFinite(rate) ? fmt(Math.round(rate)) : '–';
  const perStep = r.timed > 0 ? r.seconds / r.timed : NaN;
  $('stat-eta').textContent = fmtTime(perStep * (total - r.step));
  $('bar-fill').style.width = `${(100 * r.step) / total}%`;
  drawLossCurve($('chart') as unknown as SVGSVGElement, r.losses, total);
}

async function checkpoint(r: Run): Promise<void> {
  if (!session || !(await storageAvailable())) return;
  await saveRun(
    {
      kind: r.kind,
      step: r.step,
      loop: r.loop,
      lora: r.lora,
      seqLen: r.data.seqLen,
      base: r.kind === 'finetune' ? { name: session.name, files: session.files } : undefined,
      dataName: r.dataName,
      losses: r.losses,
    },
    await trainableState(session.model),
    await r.opt.optimizer.stateDict(),
    r.dataText,
  );
}

async function trainLoop(r: Run): Promise<void> {
  const total = r.loop.steps;
  setState('training', r.step ? `Continuing from step ${r.step}…` : 'Training: the first step compiles the GPU kernels…');
  const t0 = performance.now();
  let first = true;
  try {
    while (r.step < total && !r.stop) {
      const info = await r.opt.step(r.data, r.step);
      r.step = info.step;
      r.losses.push([info.step, info.loss]);
      // tokens/s over the steps after the first of this session (the first one compiles the kernels)
      if (first) first = false;
      else {
        r.tokens += info.tokens;
        r.seconds += info.seconds;
        r.timed++;
      }
      updateStats(r, total);
      $('stat-lr').textContent = info.lr.toExponential(1);
      $('stat-elapsed').textContent = fmtTime((performance.now() - t0) / 1000);
      $('status').textContent = `Training ${r.kind === 'pretrain' ? 'from scratch' : 'LoRA'}: step ${r.step} of ${total}, loss ${info.loss.toFixed(4)}`;
      if (!Number.isFinite(info.loss)) throw new ConfigError(`the loss is ${info.loss} at step ${r.step}: try a lower lr`);
      if (r.step % SAVE_EVERY === 0 && r.step < total) await checkpoint(r);
      await new Promise((res) => setTimeout(res, 0)); // let the page paint
    }
    await checkpoint(r);
    const stopped = r.step < total;
    const finished = `Finished ${total} steps: loss ${r.losses[0]?.[1].toFixed(3)} → ${r.losses.at(-1)?.[1].toFixed(3)}.`;
    setState(stopped ? 'stopped' : 'done', stopped ? `Stopped at step ${r.step} (checkpoint saved). Continue picks up from here.` : finished);
    r.stop = false;
    if (!stopped) await generate(`${finished} Samples below.`);
  } catch (e) {
    showError(e);
    setState('stopped', 'Training failed: see the message above.');
  }
}

function newRun(kind: Run['kind'], data: Windows, dataText: string, dataName: string, loop: LoopOptions, lora?: SavedRun['lora']): Run {
  return { kind, opt: new Optimisation(session!.model, loop), data, dataText, dataName, loop, lora, step: 0, losses: [], stop: false, tokens: 0, seconds: 0, timed: 0 };
}

async function pretrain(resume?: SavedRun): Promise<void> {
  if (!ctx) return;
  dropSession();
  try {
    const steps = resume?.loop.steps ?? Number($<HTMLInputElement>('builtin-steps').value);
    if (!Number.isInteger(steps) || steps < 1) throw new ConfigError(`steps: must be a positive integer, got ${$<HTMLInputElement>('builtin-steps').value}`);
    const { model, config, tokenizer } = builtinModel(ctx, 0);
    session = { kind: 'pretrain', model, config, tokenizer, name: 'built-in tiny Llama', files: [] };
    showModelInfo(session);
    const dataText = resume ? await loadData() : corpus;
    const data = buildWindows('bundled corpus', dataText, tokenizer, TINY_PRESET.seqLen, 'yes');
    const loop: LoopOptions = { steps, batchSize: TINY_PRESET.batchSize, gradientAccumulation: 1, lr: TINY_PRESET.lr, lrSchedule: 'cosine', weightDecay: 0.1, gradClip: 1, seed: 0 };
    run = newRun('pretrain', data, dataText, 'bundled corpus', loop);
    if (resume) await restore(run, resume);
    else {
      await clearRun();
      setState('generating', 'Sampling from the untrained model…');
      session.before = await sampleInto('before', false);
    }
    $('before-title').textContent = 'Before training (random weights)';
    $('after-title').textContent = 'After training';
    $('data-summary').textContent = `bundled corpus: ${data.tokens} tokens → ${data.count} windows of ${data.seqLen}`;
    await trainLoop(run);
  } catch (e) {
    showError(e);
    setState('idle', 'Could not start: see the message above.');
  }
}

async function restore(r: Run, saved: SavedRun): Promise<void> {
  const { weights, optimizer } = await loadCheckpoint(saved);
  restoreTrainable(session!.model, weights);
  r.opt.optimizer.loadStateDict(optimizer);
  r.opt.scheduler.loadStateDict({ lastStep: saved.step });
  r.step = saved.step;
  r.losses = saved.losses;
  updateStats(r, r.loop.steps);
  $('resume').hidden = true;
}

async function finetune(resume?: SavedRun): Promise<void> {
  if (!ctx || !session || session.kind !== 'finetune') return;
  try {
    const tok = session.tokenizer;
    if (!tok) throw new TokenizerError(`${session.name}: no tokenizer.json among the picked files (pick it with the model files)`);
    const o = resume ? { ...FINETUNE_DEFAULTS, ...resume.loop, ...resume.lora } : readOptions();
    if (resume) applyOptions(o);
    const dataText = resume ? await loadData() : $<HTMLTextAreaElement>('data-text').value;
    const dataName = resume?.dataName ?? ($<HTMLInputElement>('pick-data').files?.[0]?.name || 'pasted data');
    if (!dataText.trim()) throw new ConfigError('data: paste text or JSONL, or pick a file');
    if (o.seqLen > session.config.maxPositionEmbeddings) throw new ConfigError(`--seq-len ${o.seqLen} exceeds the model's max_position_embeddings ${session.config.maxPositionEmbeddings}`);
    const targets = resolveTargets(o.targets);
    const linears = new Set([...session.model.namedParameters()].map(([n]) => n.split('.').at(-2)!).filter((n) => n.endsWith('_proj')));
    const unknown = targets.filter((t) => !linears.has(t.split('.').pop()!));
    if (unknown.length) throw new ConfigError(`--targets ${unknown.join(',')}: not a projection of this model (it has ${[...linears].join(', ')}, or "all")`);
    checkFits(ctx, session.config, o.batchSize, o.seqLen, session.name);
    const data = buildWindows(dataName, dataText, tok, o.seqLen, o.pack);
    $('data-summary').textContent = `${dataName}: ${data.documents} documents, ${data.tokens} tokens → ${data.count} windows of ${o.seqLen}`;
    if (!resume) {
      setState('generating', 'Generating with the base model…');
      await sampleInto('before', false);
    }
    session.model.gradientCheckpointing = o.gradientCheckpointing;
    applyLora(session.model, { r: o.r, alpha: o.alpha, targetModules: targets, seed: o.seed });
    showModelInfo(session);
    const loop: LoopOptions = { steps: o.steps, batchSize: o.batchSize, gradientAccumulation: o.gradientAccumulation, lr: o.lr, lrSchedule: o.lrSchedule, warmup: o.warmup, weightDecay: o.weightDecay, gradClip: o.gradClip, seed: o.seed };
    run = newRun('finetune', data, dataText, dataName, loop, { r: o.r, alpha: o.alpha, targets: o.targets, seqLen: o.seqLen, pack: o.pack });
    if (resume) await restore(run, resume);
    else await clearRun();
    $('before-title').textContent = 'Base model';
    $('after-title').textContent = 'With the LoRA adapter';
    await trainLoop(run);
  } catch (e) {
    showError(e);
    setState(session ? 'loaded' : 'idle', 'Could not start: see the message above.');
  }
}

function offerResume(saved: SavedRun): void {
  const what = saved.kind === 'pretrain' ? 'A from-scratch run of the built-in model' : `A LoRA fine-tune of ${saved.base?.name}`;
  const need = saved.kind === 'finetune' && !(session?.kind === 'finetune' && JSON.stringify(session.files) === JSON.stringify(saved.base?.files));
  $('resume-text').textContent = `${what} was saved at step ${saved.step} of ${saved.loop.steps} (${new Date(saved.savedAt).toLocaleString()}).${need ? ' Pick the same model folder to resume it.' : ''}`;
  $<HTMLButtonElement>('resume-go').disabled = need;
  $('resume').hidden = false;
}

// ---- generation ----

async function sampleInto(pane: 'before' | 'after', base: boolean): Promise<string> {
  if (!session?.tokenizer) return '';
  const prompt = $<HTMLInputElement>('prompt').value;
  const o = {
    maxNewTokens: Math.max(1, Number($<HTMLInputElement>('max-new').value) || 60),
    temperature: Math.max(0, Number($<HTMLInputElement>('temperature').value) || 0),
    topK: 40,
    topP: 0.95,
    seed: 0,
  };
  const el = $(pane);
  el.textContent = prompt;
  const out = await generateText(session.model, session.tokenizer, prompt, o, (text) => (el.textContent = prompt + text), base);
  const ids = session.tokenizer.encode(prompt);
  lastGenerated = { prompt: ids, before: pane === 'before' ? out : (lastGenerated?.before ?? []), after: pane === 'after' ? out : (lastGenerated?.after ?? []) };
  return el.textContent ?? '';
}

async function generate(done = 'Generated.'): Promise<void> {
  if (!session) return;
  const prev = state;
  setState('generating', 'Generating…');
  try {
    const lora = session.kind === 'finetune' && loraModules(session.model).size > 0;
    if (lora) {
      await sampleInto('before', true);
      await sampleInto('after', false);
    } else if (session.kind === 'pretrain' && run && run.step > 0) await sampleInto('after', false);
    else await sampleInto('before', false);
    setState(prev === 'generating' ? 'loaded' : prev, done);
  } catch (e) {
    showError(e);
    setState(prev === 'generating' ? 'loaded' : prev, 'Generation failed: see the message above.');
  }
}

// ---- downloads ----

async function exportFiles(kind: 'adapter' | 'merged' | 'model'): Promise<void> {
  if (!session) return;
  const prev = state;
  setState('generating', 'Preparing the files…');
  try {
    if (kind === 'adapter') {
      const tree = memoryTree('rusty-lora');
      await saveLoraAdapter(session.model, tree, { baseModel: session.name });
      offer($('downloads'), tree.files, 'rusty-lora');
    } else offer($('downloads'), await modelFiles(session, kind === 'merged'), kind === 'merged' ? 'rusty-lora/merged' : 'rusty-model');
    setState(prev, 'Files ready: your browser saves them to its download folder.');
  } catch (e) {
    showError(e);
    setState(prev);
  }
}

// ---- start ----

function pickedFiles(input: HTMLInputElement): PickedFile[] {
  return [...(input.files ?? [])];
}

async function main(): Promise<void> {
  buildOptionsForm($('options'));
  drawLossCurve($('chart') as unknown as SVGSVGElement, [], 1);
  $('error-close').onclick = () => ($('error').hidden = true);
  $('tab-builtin').onclick = () => {
    $('tab-builtin').classList.add('active');
    $('tab-own').classList.remove('active');
    $('panel-builtin').hidden = false;
    $('panel-own').hidden = true;
  };
  $('tab-own').onclick = () => {
    $('tab-own').classList.add('active');
    $('tab-builtin').classList.remove('active');
    $('panel-own').hidden = false;
    $('panel-builtin').hidden = true;
  };
  $('pretrain').onclick = () => void pretrain();
  $('pick-dir').onchange = () => void loadOwnModel(pickedFiles($<HTMLInputElement>('pick-dir')));
  $('pick-files').onchange = () => void loadOwnModel(pickedFiles($<HTMLInputElement>('pick-files')));
  $('pick-data').onchange = async () => {
    const f = $<HTMLInputElement>('pick-data').files?.[0];
    if (f) $<HTMLTextAreaElement>('data-text').value = await f.text();
  };
  $('start').onclick = () => void finetune();
  $('stop').onclick = () => {
    if (run) run.stop = true;
    $('status').textContent = 'Stopping after this step…';
  };
  $('continue').onclick = () => run && void trainLoop(run);
  $('generate').onclick = () => void generate();
  $('export-adapter').onclick = () => void exportFiles('adapter');
  $('export-merged').onclick = () => void exportFiles('merged');
  $('export-model').onclick = () => void exportFiles('model');
  $('resume-discard').onclick = async () => {
    await clearRun();
    $('resume').hidden = true;
  };
  $('resume-go').onclick = async () => {
    const saved = await loadRun();
    if (!saved) return;
    if (saved.kind === 'pretrain') await pretrain(saved);
    else await finetune(saved);
  };
  try {
    ctx = await openGpu();
    const i = ctx.info;
    $('device').textContent = `WebGPU · ${i.description || i.architecture || i.vendor || 'adapter'}${i.isSoftware ? ' (CPU software adapter: slow)' : ''}`;
    $('device').classList.add('ok');
    const saved = await loadRun();
    if (saved) offerResume(saved);
    setState('idle', 'Ready: pretrain the built-in model, or pick your own model to fine-tune.');
  } catch (e) {
    $('device').textContent = 'no WebGPU';
    $('device').classList.add('bad');
    showError(e);
    setState('no-gpu', 'This page needs WebGPU.');
  }
}

/** For the browser test and the console: state, losses, the model's logits, the last generation. */
(window as unknown as { rustyPlayground: unknown }).rustyPlayground = {
  get state() {
    return state;
  },
  get losses() {
    return run?.losses ?? [];
  },
  get step() {
    return run?.step ?? 0;
  },
  get lastGenerated() {
    return lastGenerated;
  },
  get rate() {
    return run && run.seconds > 0 ? run.tokens / run.seconds : null;
  },
  async logits(ids: number[][]): Promise<number[]> {
    if (!session) throw new ConfigError('no model loaded');
    return [...(await logitsOf(session.model, ids))];
  },
  error: () => ($('error').hidden ? null : $('error').textContent),

};

void main();
