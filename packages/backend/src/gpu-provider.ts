import { DeviceError } from './errors';

/** Dawn toggles always on in Node: experimental features (subgroup matrices) and f16 on NVIDIA. */
const BASE_TOGGLES = ['allow_unsafe_apis', 'vulkan_enable_f16_on_nvidia'];

export interface SpeedToggles {
  /** Dawn `disable_robustness`: no bounds clamping of buffer accesses in shaders. */
  disableRobustness: boolean;
  /** Dawn `skip_validation`. */
  skipValidation: boolean;
  /** Disable `lazy_clear_resource_on_first_use` (new buffers are not zeroed). */
  noLazyClear: boolean;
}

const instances = new Map<string, GPU>();

function dawnFlags(speed: SpeedToggles, adapterName?: string): string[] {
  const enable = [...BASE_TOGGLES];
  const disable = ['timestamp_quantization'];
  if (speed.disableRobustness) enable.push('disable_robustness');
  if (speed.skipValidation) enable.push('skip_validation');
  if (speed.noLazyClear) disable.push('lazy_clear_resource_on_first_use');
  const flags = [`enable-dawn-features=${enable.join(',')}`, `disable-dawn-features=${disable.join(',')}`];
  if (adapterName) flags.push(`adapter=${adapterName}`);
  return flags;
}

const INSTALL_HINT =
  'No WebGPU adapter was found. Rusty needs a Vulkan driver (Linux), Metal (macOS) or D3D12 (Windows). ' +
  'On Debian 12 without a GPU install Mesa >= 25 lavapipe: add bookworm-backports to apt and run ' +
  '`apt-get install -t bookworm-backports mesa-vulkan-drivers libvulkan1` (or run `bash .ci/setup.sh`).';

export { INSTALL_HINT };

/** The `GPU` object: `navigator.gpu` in browsers, Dawn's `webgpu` package in Node. */
export async function getGPU(speed: SpeedToggles, adapterName?: string): Promise<GPU> {
  const nav = (globalThis as { navigator?: { gpu?: GPU } }).navigator;
  if (nav?.gpu && typeof process === 'undefined') return nav.gpu;
  const key = dawnFlags(speed, adapterName).join(' ');
  const cached = instances.get(key);
  if (cached) return cached;
  let mod: { create: (flags: string[]) => GPU; globals: Record<string, unknown> };
  try {
    mod = (await import('webgpu')) as unknown as typeof mod;
  } catch (e) {
    if (nav?.gpu) return nav.gpu;
    throw new DeviceError(`could not load Dawn (the 'webgpu' package): ${(e as Error).message}. ${INSTALL_HINT}`, {
      cause: e,
    });
  }
  for (const [k, v] of Object.entries(mod.globals)) {
    if (!(k in globalThis)) (globalThis as Record<string, unknown>)[k] = v;
  }
  const gpu = mod.create(dawnFlags(speed, adapterName));
  instances.set(key, gpu);
  return gpu;
}
