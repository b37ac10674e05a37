import type { Tensor } from './tensor';

interface Scope {
  tensors: Set<Tensor>;
}

const scopes: Scope[] = [];
let gradDisabled = 0;

/** Is the tape recording (not inside `noGrad`)? */
export function isGradEnabled(): boolean {
  return gradDisabled === 0;
}

/** Run `fn` without recording operations for backward (like `torch.no_grad()`). */
export function noGrad<T>(fn: () => T): T {
  gradDisabled++;
  try {
    const r = fn();
    if (r instanceof Promise) return r.finally(() => gradDisabled--) as T;
    gradDisabled--;
    return r;
  } catch (e) {
    gradDisabled--;
    throw e;
  }
}

export function track(t: Tensor): void {
  scopes[scopes.length - 1]?.tensors.add(t);
}

export function untrack(t: Tensor): void {
  for (const s of scopes) s.tensors.delete(t);
}

function collect(x: unknown, out: Set<unknown>, depth = 0): void {
  if (x === null || typeof x !== 'object' || depth > 4) return;
  if ((x as { isTensor?: boolean }).isTensor) {
    out.add(x);
    return;
  }
  if (Array.isArray(x)) for (const v of x) collect(v, out, depth + 1);
  else if (x instanceof Map) for (const v of x.values()) collect(v, out, depth + 1);
  else if (Object.getPrototypeOf(x) === Object.prototype) for (const v of Object.values(x)) collect(v, out, depth + 1);
}

/**
 * Run `fn` and dispose every tensor it created except those it returns (in a value, array, Map or plain
 * object). Synchronous functions only; nested scopes hand their kept tensors to the enclosing scope.
 */
export function tidy<T>(fn: () => T): T {
  const scope: Scope = { tensors: new Set() };
  scopes.push(scope);
  let result: T;
  try {
    result = fn();
  } finally {
    scopes.pop();
  }
  if (result instanceof Promise) throw new TypeError('tidy() takes a synchronous function');
  const keep = new Set<unknown>();
  collect(result, keep);
  for (const t of scope.tensors) {
    if (keep.has(t)) track(t);
    else t.dispose();
  }
  return result;
}
