/**
 * How many compute units (NVIDIA: streaming multiprocessors) an adapter has. WebGPU does not say; kernels that
 * plan their grid in waves (the tensor-core matmul, `matmul-tc.ts`) look the adapter's name up here. Facts from
 * the vendors' specifications; an adapter not listed gets null (no wave planning), and `RUSTY_COMPUTE_UNITS`
 * overrides the table (a count of units; 0: unknown, no wave planning).
 */
import type { ContextInfo } from './context';
import { ConfigError } from './errors';

/** Device-name patterns and their compute units, most specific first (Dawn names NVIDIA adapters in lower case
 *  with hyphens, e.g. `nvidia-h100-80gb-hbm3`). */
const UNITS: readonly [RegExp, number][] = [
  [/\bH100\b.*\bPCIe\b/i, 114],
  [/\b(GH200|H200|H100|H800)\b/i, 132],
  [/\b(A100|A800)\b/i, 108],
  [/\bA30\b/i, 56],
  [/\bA10\b/i, 72],
  [/\bL40S?\b/i, 142],
  [/\bL4\b/i, 58],
  [/\bRTX[ -]4090\b/i, 128],
  [/\bRTX[ -]3090\b/i, 82],
];

/** The adapter's compute units from its name, or null where the table does not know it. */
export function computeUnits(info: Pick<ContextInfo, 'device' | 'description' | 'vendor'>, env: string | undefined = globalThis.process?.env?.RUSTY_COMPUTE_UNITS): number | null {
  if (env !== undefined && env !== '') {
    const n = Number(env);
    if (!Number.isInteger(n) || n < 0) throw new ConfigError(`RUSTY_COMPUTE_UNITS must be a non-negative integer, got ${JSON.stringify(env)}`);
    return n || null;
  }
  const name = `${info.device} ${info.description}`;
  for (const [re, n] of UNITS) if (re.test(name)) return n;
  return null;
}
