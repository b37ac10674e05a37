/** How long a GPU wait may last before {@link waitGpu} says so. */
export const GPU_WAIT_NOTICE_MS = 60_000;

/** Await a promise of the device; if it is still pending after {@link GPU_WAIT_NOTICE_MS}, say on stderr (the
 *  console in a browser) what it waits for: a stalled GPU should not look like a silent hang. */
export async function waitGpu<T>(what: string, p: Promise<T>): Promise<T> {
  const timer = setTimeout(() => {
    const msg = `rusty: still waiting for the GPU after ${GPU_WAIT_NOTICE_MS / 1000} s (${what})`;
    if (typeof process !== 'undefined' && process.stderr) process.stderr.write(msg + '\n');
    else console.warn(msg);
  }, GPU_WAIT_NOTICE_MS);
  try {
    return await p;
  } finally {
    clearTimeout(timer);
  }
}
