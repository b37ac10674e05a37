import { binary, unary, type DeviceTensor, type Context } from '@rusty/backend';
import { defineOp } from '../op';
import type { Tensor } from '../tensor';
import { releaseRef } from '../storage';
import { sumToShape } from './util';

const release = (ctx: Context, ...ts: DeviceTensor[]) => ts.forEach((t) => releaseRef(ctx, t.buffer));

const addOp = defineOp({
  name: 'add',
  forward: (ctx, [a, b]) => ({ outputs: binary(ctx, 'add', a!, b!) }),
  backward: (ctx, [g], _s, inputs) => inputs.map((x) => (x.requiresGrad ? sumToShape(ctx, g!, x.shape) : null)),
});

const subOp = defineOp({
  name: 'sub',
  forward: (ctx, [a, b]) => ({ outputs: binary(ctx, 'sub', a!, b!) }),
  backward: (ctx, [g], _s, [ma, mb]) => {
    const da = ma!.requiresGrad ? sumToShape(ctx, g!, ma!.shape) : null;
    let db = null;
    if (mb!.requiresGrad) {
      const n = unary(ctx, 'neg', g!);
      db = sumToShape(ctx, n, mb!.shape);
      release(ctx, n);
    }
    return [da, db];
  },
});

const mulOp = defineOp({
  name: 'mul',
  forward: (ctx, [a, b]) => ({ outputs: binary(ctx, 'mul', a!, b!), saved: [a!, b!] }),
  backward: (ctx, [g], [a, b], [ma, mb]) => {
    const grad = (other: DeviceTensor, shape: readonly number[]) => {
      const p = binary(ctx, 'mul', g!, other);
      const r = sumToShape(ctx, p, shape);
      release(ctx, p);
      return r;
    };
    return [ma!.requiresGrad ? grad(b!, ma!.shape) : null, mb!.requiresGrad ? grad(a!, mb!.shape) : null];
  },
});

const divOp = defineOp({
  name: 'div',
  forward: (ctx, [a, b]) => ({ outputs: binary(ctx, 'div', a!, b!), saved: [a!, b!] }),
  backward: (ctx, [g], [a, b], [ma, mb]) => {
    let da = null;
    let db = null;
    if (ma!.requiresGrad) {
      const p = binary(ctx, 'div', g!, b!);
      da = sumToShape(ctx, p, ma!.shape);
      release(ctx, p);
    }
    if (mb!.requiresGrad) {
      // d/db (a / b) = -a / b^2
      const q = binary(ctx, 'div', a!, b!);
      const q2 = binary(ctx, 'div', q, b!);
      const p = binary(ctx, 'mul', g!, q2);
      const n = unary(ctx, 'neg', p);
      db = sumToShape(ctx, n, mb!.shape);
      release(ctx, q, q2, p, n);
    }
    return [da, db];
  },
});

/** Elementwise a + b with broadcasting. */
export const add = (a: Tensor, b: Tensor): Tensor => addOp([a, b]);
/** Elementwise a - b with broadcasting. */
export const sub = (a: Tensor, b: Tensor): Tensor => subOp([a, b]);
/** Elementwise a * b with broadcasting. */
export const mul = (a: Tensor, b: Tensor): Tensor => mulOp([a, b]);
/** Elementwise a / b with broadcasting. */
export const div = (a: Tensor, b: Tensor): Tensor => divOp([a, b]);

const scaleOp = defineOp<{ s: number; c: number }>({
  name: 'affine',
  forward: (ctx, [x], { s, c }) => {
    if (c === 0) return { outputs: unary(ctx, 'scale', x!, s) };
    const y = unary(ctx, 'scale', x!, s);
    const z = unary(ctx, 'addScalar', y, c);
    release(ctx, y);
    return { outputs: z };
  },
  backward: (ctx, [g], _s, _m, { s }) => [unary(ctx, 'scale', g!, s)],
});

/** x * s (+ c). */
export const scale = (x: Tensor, s: number, c = 0): Tensor => scaleOp([x], { s, c });
/** -x */
export const neg = (x: Tensor): Tensor => scaleOp([x], { s: -1, c: 0 });

const expOp = defineOp({
  name: 'exp',
  forward: (ctx, [x]) => {
    const y = unary(ctx, 'exp', x!);
    return { outputs: y, saved: [y] };
  },
  backward: (ctx, [g], [y]) => [binary(ctx, 'mul', g!, y!)],
});

const logOp = defineOp({
  name: 'log',
  forward: (ctx, [x]) => ({ outputs: unary(ctx, 'log', x!), saved: [x!] }),
  backward: (ctx, [g], [x]) => [binary(ctx, 'div', g!, x!)],
});

const tanhOp = defineOp({
  name: 'tanh',
  forward: (ctx, [x]) => {
    const y = unary(ctx, 'tanh', x!);
    return { outputs: y, saved: [y] };
  },
  backward: (ctx, [g], [y]) => {
    // g * (1 - y^2)
    const y2 = unary(ctx, 'square', y!);
    const d = unary(ctx, 'scale', y2, -1);
    const d1 = unary(ctx, 'addScalar', d, 1);
    const r = binary(ctx, 'mul', g!, d1);
    release(ctx, y2, d, d1);
    return [r];
  },
});

const sigmoidOp = defineOp({
  name: 'sigmoid',
  forward: (ctx, [x]) => {
    const y = unary(ctx, 'sigmoid', x!);
    return { outputs: y, saved: [y] };
  },
  backward: (ctx, [g], [y]) => {
    // g * y * (1 - y)
    const a = unary(ctx, 'scale', y!, -1);
    const b = unary(ctx, 'addScalar', a, 1);
    const c = binary(ctx, 'mul', y!, b);
    const r = binary(ctx, 'mul', g!, c);
    release(ctx, a, b, c);
    return [r];
  },
});

const siluOp = defineOp({
  name: 'silu',
  forward: (ctx, [x]) => ({ outputs: unary(ctx, 'silu', x!), saved: [x!] }),
  backward: (ctx, [g], [x]) => {
    // silu'(x) = s + x s (1 - s) = s (1 + x (1 - s))
    const s = unary(ctx, 'sigmoid', x!);
    const a = unary(ctx, 'scale', s, -1);
    const b = unary(ctx, 'addScalar', a, 1);
    const c = binary(ctx, 'mul', x!, b);
    const d = unary(ctx, 'addScalar', c, 1);
    const e = binary(ctx, 'mul', s, d);
    const r = binary(ctx, 'mul', g!, e);
    release(ctx, s, a, b, c, d, e);
    return [r];
  },
});

const squareOp = defineOp({
  name: 'square',
  forward: (ctx, [x]) => ({ outputs: unary(ctx, 'square', x!), saved: [x!] }),
  backward: (ctx, [g], [x]) => {
    const a = binary(ctx, 'mul', g!, x!);
    const r = unary(ctx, 'scale', a, 2);
    release(ctx, a);
    return [r];
  },
});

/** e^x */
export const exp = (x: Tensor): Tensor => expOp([x]);
/** ln x */
export const log = (x: Tensor): Tensor => logOp([x]);
export const tanh = (x: Tensor): Tensor => tanhOp([x]);
export const sigmoid = (x: Tensor): Tensor => sigmoidOp([x]);
/** x * sigmoid(x) */
export const silu = (x: Tensor): Tensor => siluOp([x]);
/** x^2 */
export const square = (x: Tensor): Tensor => squareOp([x]);

