/**
 * The README's "Your own kernel" example, run as a test so that it cannot rot: the code between the START and
 * END markers below must appear verbatim in packages/backend/README.md (checked by the second test).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createContext, download, grid1d, matmul, release, upload, type Context, type KernelDef } from '../../index';

let ctx: Context;
beforeAll(async () => {
  ctx = await createContext();
});
afterAll(() => ctx.destroy());

it('runs the README example: a user kernel through the context, then a built-in op', async () => {
  const log: unknown[] = [];
  const console = { log: (x: unknown) => log.push(x) };
  // README-EXAMPLE-START
  // y = a * x + y, with x stored as bf16 (decoded by the generated read_x) and y as f32
  const axpy: KernelDef = {
    name: 'my-axpy',
    code: /* wgsl */ `
      @compute @workgroup_size(256)
      fn main(@builtin(global_invocation_id) g: vec3u) {
        let i = g.x + g.y * p.row;
        if (i >= p.n) { return; }
        y[i] = p.a * read_x(i) + y[i];
      }`,
    bindings: [
      { name: 'x', access: 'read', dtype: 'bf16' },
      { name: 'y', access: 'rw', dtype: 'f32' },
    ],
    params: ['u32:n', 'u32:row', 'f32:a'],
  };
  const x = upload(ctx, [1, 2, 3, 4, 5, 6], [6], 'bf16');
  const y = upload(ctx, [10, 20, 30, 40, 50, 60], [6]);
  const k = await ctx.compile(axpy); // ctx.kernel(axpy) is the same without waiting for the compiler
  const { wg, row } = grid1d(6, 256); // workgroups (split past 65535) and threads per grid row
  ctx.dispatch(k, [x.buffer, y.buffer], wg, [6, row, 2]);
  console.log(await download(ctx, y)); // Float32Array [12, 24, 36, 48, 60, 72]

  // the result is an ordinary tensor for the built-in ops: [2, 3] @ [3, 2]
  const w = upload(ctx, [1, 0, 0, 1, 1, 1], [3, 2]);
  const z = matmul(ctx, { ...y, shape: [2, 3] }, w);
  console.log(await download(ctx, z)); // Float32Array [48, 60, 120, 132]
  release(ctx, x, y, w, z);
  // README-EXAMPLE-END
  expect(log.map((v) => Array.from(v as Float32Array))).toEqual([
    [12, 24, 36, 48, 60, 72],
    [48, 60, 120, 132],
  ]);
});

it('the README shows exactly this example', () => {
  const me = readFileSync(fileURLToPath(import.meta.url), 'utf8');
  const body = me.slice(me.indexOf('// README-EXAMPLE-START\n') + 24, me.indexOf('  // README-EXAMPLE-END'));
  const code = body
    .split('\n')
    .map((l) => l.replace(/^ {2}/, ''))
    .join('\n');
  const readme = readFileSync(fileURLToPath(new URL('../../../README.md', import.meta.url)), 'utf8');
  expect(readme).toContain(code);
});
