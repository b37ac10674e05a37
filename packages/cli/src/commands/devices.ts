import { createContext, fmtBytes, type ContextInfo } from '@rusty/backend';
import { flag, parseArgs, type CommandSpec } from '../args';
import { computePathLines, computePaths } from '../compute-paths';

const SHOWN_LIMITS = [
  'maxBufferSize',
  'maxStorageBufferBindingSize',
  'maxComputeWorkgroupStorageSize',
  'maxComputeInvocationsPerWorkgroup',
  'maxComputeWorkgroupSizeX',
  'maxComputeWorkgroupsPerDimension',
  'maxStorageBuffersPerShaderStage',
  'minStorageBufferOffsetAlignment',
];

/** Which fast paths Rusty uses on this adapter. */
export function fastPaths(info: ContextInfo): Record<string, boolean> {
  return {
    'native f16 arithmetic (shader-f16)': info.features.shaderF16,
    'subgroup reductions (subgroups)': info.features.subgroups,
    'tensor-core f16 matmul (subgroup matrices)': info.features.subgroupMatrix,
    'per-kernel GPU timing (timestamp-query)': info.features.timestampQuery,
  };
}

/** `rusty devices`: the adapter, its features and limits. */
export async function devicesCommand(args: { json: boolean }): Promise<void> {
  const ctx = await createContext();
  try {
    const info = ctx.info;
    if (args.json) {
      console.log(JSON.stringify({ ...info, fastPaths: fastPaths(info), paths: computePaths(ctx) }, null, 2));
      return;
    }
    const name = [info.vendor, info.architecture, info.device, info.description].filter(Boolean).join(' / ');
    console.log(`adapter     ${name || '(unnamed)'}${info.isSoftware ? '  [software: CPU emulation, slow]' : ''}`);
    console.log('features');
    for (const [k, on] of Object.entries(fastPaths(info))) console.log(`  ${on ? 'yes' : 'no '}  ${k}`);
    if (info.subgroupMatrixConfigs.length)
      console.log(`  subgroup-matrix configs: ${info.subgroupMatrixConfigs.map((c) => `${c.componentType}->${c.resultComponentType} ${c.M}x${c.N}x${c.K}`).join(', ')}`);
    for (const l of computePathLines(computePaths(ctx))) console.log(l);
    console.log('limits');
    for (const k of SHOWN_LIMITS) {
      const v = info.limits[k];
      if (v === undefined) continue;
      const shown = /Size$/.test(k) ? `${v} (${fmtBytes(v)})` : String(v);
      console.log(`  ${k.padEnd(36)} ${shown}`);
    }
    const s = info.speed;
    console.log(
      `speed toggles  robustness ${s.disableRobustness ? 'off' : 'on'}, validation ${s.skipValidation ? 'off' : 'on'}, lazy clear ${s.noLazyClear ? 'off' : 'on'}`,
    );
  } finally {
    ctx.destroy();
  }
}

const flags = {
  json: flag.bool('print everything (adapter info, features, all limits, fast paths) as JSON'),
};

export const devicesSpec: CommandSpec<typeof flags> = {
  name: 'devices',
  summary: 'show the WebGPU adapter, its features, limits and the matmul / attention kernels it gets',
  usage: 'rusty devices [--json]',
  description: `Shows the adapter WebGPU offers, its optional features (shader-f16, subgroups, timestamp-query,
subgroup matrices), its limits and which kernels its products run on: matmul per operand dtype (tensor cores
through subgroup matrices for f16 x f16 where the adapter has them, with the fragment and tiles chosen, else the
portable kernels and why), attention per head dim, and products with quantized weights (--quantize).`,
  flags,
  examples: ['rusty devices', 'RUSTY_ADAPTER=nvidia rusty devices --json'],
};

export async function devicesMain(argv: string[]): Promise<number> {
  const { opts } = parseArgs(devicesSpec, argv);
  await devicesCommand({ json: !!opts.json });
  return 0;
}
