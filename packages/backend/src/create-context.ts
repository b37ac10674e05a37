import { Context, type ContextInfo, type ContextOptions, type OptionalFeature } from './context';
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
  const adapter = await gpu.requestAdapter(powerPreference ? { powerPreference } : undefined);
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
    subgroupMatrixConfigs: [...((ai as unknown as { subgroupMatrixConfigs?: unknown[] }).subgroupMatrixConfigs ?? [])],
    limits,
    speed,
  };
  return new Context(device, info, opts);
}

