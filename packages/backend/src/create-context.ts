import { Context, type ContextInfo, type ContextOptions, type OptionalFeature, type SubgroupMatrixConfig } from './context';
import { DeviceError } from './errors';
import { getGPU, INSTALL_HINT, type SpeedToggles } from './gpu-provider';

const OPTIONAL_FEATURES: OptionalFeature[] = [
  'shader-f16',
  'subgroups',
  'timestamp-query',
  'chromium-experimental-subgroup-matrix',
];

function envSpeed(): boolean {
  const env = typeof process !== 'undefined' ? process.env : {};
  return env.RUSTY_SAFE !== '1';
}

/**
 * Dawn prints these from native code straight to file descriptor 2 when it builds an adapter whose Vulkan
 * driver reports more dynamic buffers than Dawn supports (lavapipe does): harmless notices a user cannot act on.
 */
const DRIVER_NOTICE = /^Warning: maxDynamic\w+ artificially reduced from \d+ to \d+ to fit dynamic offset allocation limit\.$/;

/**
 * Run `fn` (the adapter request) with Node's file descriptor 2 pointed at a temporary file, then restore it and
 * pass on every captured line except Dawn's adapter-limit notices (`DRIVER_NOTICE`), so real errors still reach
 * stderr. Done only where reopening fd 2 is safe: Node on Linux or macOS with stderr a terminal or a pipe (a
 * regular file reopened would get a second write offset), and not with RUSTY_DEBUG=1 (then everything shows).
 * Elsewhere `fn` just runs.
 */
async function withDriverNoticesFiltered<T>(fn: () => Promise<T>): Promise<T> {
  const proc = typeof process !== 'undefined' ? process : undefined;
  const getBuiltin = (proc as { getBuiltinModule?: (id: string) => unknown } | undefined)?.getBuiltinModule;
  if (!proc || !getBuiltin || proc.env.RUSTY_DEBUG === '1' || (proc.platform !== 'linux' && proc.platform !== 'darwin')) return fn();
  const fs = getBuiltin('node:fs') as typeof import('node:fs');
  const os = getBuiltin('node:os') as typeof import('node:os');
  const { O_WRONLY, O_APPEND } = fs.constants;
  let captureFile: string;
  let orig: number;
  try {
    const st = fs.fstatSync(2);
    fs.fstatSync(0);
    fs.fstatSync(1);
    if (!(st.isFIFO() || st.isCharacterDevice())) return fn();
    // a pipe must have a reader, else opening it again would block
    if (st.isFIFO()) fs.closeSync(fs.openSync('/dev/fd/2', O_WRONLY | fs.constants.O_NONBLOCK));
    // a second descriptor for what fd 2 is now
    orig = fs.openSync('/dev/fd/2', O_WRONLY | O_APPEND);
    captureFile = `${os.tmpdir()}/rusty-dawn-${proc.pid}-${Date.now().toString(36)}.log`;
    fs.writeFileSync(captureFile, '');
  } catch {
    return fn();
  }
  // fd 2 -> the capture file (the lowest free descriptor is 2 once it is closed)
  fs.closeSync(2);
  const cap = fs.openSync(captureFile, O_WRONLY | O_APPEND);
  const restore = (): void => {
    if (cap === 2) fs.closeSync(2);
    else fs.closeSync(cap);
    const back = fs.openSync(`/dev/fd/${orig}`, O_WRONLY | O_APPEND);
    if (back !== 2) fs.closeSync(back);
    fs.closeSync(orig);
    let text = '';
    try {
      text = fs.readFileSync(captureFile, 'utf8');
      fs.unlinkSync(captureFile);
    } catch {
      // nothing captured
    }
    const kept = text.split('\n').filter((l, i, a) => (l || i < a.length - 1) && !DRIVER_NOTICE.test(l));
    if (kept.length) fs.writeSync(2, kept.join('\n') + '\n');
  };
  try {
    return await fn();
  } finally {
    restore();
  }
}

/** Create a GPU context: pick an adapter, request its maximum limits and the optional features it has. */
export async function createContext(opts: ContextOptions = {}): Promise<Context> {
  const env = typeof process !== 'undefined' ? process.env : ({} as Record<string, string | undefined>);
  const on = opts.speed === undefined ? envSpeed() : opts.speed !== false;
  const part = typeof opts.speed === 'object' ? opts.speed : {};
  const speed: SpeedToggles = {
    disableRobustness: part.disableRobustness ?? on,
    skipValidation: part.skipValidation ?? on,
    noLazyClear: part.noLazyClear ?? on,
  };
  const adapterName = opts.adapter ?? env.RUSTY_ADAPTER;
  const gpu = await getGPU(speed, adapterName);
  const powerPreference = opts.powerPreference ?? (env.RUSTY_POWER_PREFERENCE as GPUPowerPreference | undefined);
  const adapter = await withDriverNoticesFiltered(() => gpu.requestAdapter(powerPreference ? { powerPreference } : undefined));
  if (!adapter) throw new DeviceError(INSTALL_HINT);
  const ai = adapter.info;
  const desc = [ai.vendor, ai.architecture, ai.device, ai.description].join(' ');
  if (adapterName && !desc.toLowerCase().includes(adapterName.toLowerCase()))
    throw new DeviceError(`no adapter matches '${adapterName}' (found: ${desc.trim() || 'unnamed adapter'})`);
  const skip = new Set(opts.disableFeatures ?? []);
  const requiredFeatures = OPTIONAL_FEATURES.filter((f) => adapter.features.has(f) && !skip.has(f)) as GPUFeatureName[];
  const requiredLimits: Record<string, number> = {};
  for (const k in adapter.limits) {
    const v = (adapter.limits as unknown as Record<string, unknown>)[k];
    if (typeof v === 'number' && !/^maxDynamic/.test(k)) requiredLimits[k] = v;
  }
  let device: GPUDevice;
  try {
    device = await adapter.requestDevice({ requiredFeatures, requiredLimits });
  } catch (e) {
    throw new DeviceError(`requesting a device from ${desc.trim()} failed: ${(e as Error).message}`, { cause: e });
  }
  const limits: Record<string, number> = {};
  for (const k in device.limits) {
    const v = (device.limits as unknown as Record<string, unknown>)[k];
    if (typeof v === 'number') limits[k] = v;
  }
  const has = (f: string) => device.features.has(f);
  const info: ContextInfo = {
    vendor: ai.vendor,
    architecture: ai.architecture,
    device: ai.device,
    description: ai.description,
    isSoftware: /llvmpipe|lavapipe|swiftshader|warp|software/i.test(desc),
    features: {
      shaderF16: has('shader-f16'),
      subgroups: has('subgroups'),
      timestampQuery: has('timestamp-query'),
      subgroupMatrix: has('chromium-experimental-subgroup-matrix'),
    },
    subgroupMatrixConfigs: has('chromium-experimental-subgroup-matrix') ? matrixConfigs(ai) : [],
    subgroupSizes: {
      min: (ai as unknown as { subgroupMinSize?: number }).subgroupMinSize ?? 0,
      max: (ai as unknown as { subgroupMaxSize?: number }).subgroupMaxSize ?? 0,
    },
    wgslFeatures: [...((gpu as unknown as { wgslLanguageFeatures?: Iterable<string> }).wgslLanguageFeatures ?? [])],
    limits,
    speed,
  };
  return new Context(device, info, opts);
}


/** The adapter's subgroup-matrix configurations as plain objects (Dawn hands out wrapper objects). */
function matrixConfigs(ai: GPUAdapterInfo): SubgroupMatrixConfig[] {
  const list = (ai as unknown as { subgroupMatrixConfigs?: Iterable<Record<string, unknown>> }).subgroupMatrixConfigs ?? [];
  return [...list].map((c) => ({
    M: Number(c.M),
    N: Number(c.N),
    K: Number(c.K),
    componentType: String(c.componentType),
    resultComponentType: String(c.resultComponentType),
  }));
}
