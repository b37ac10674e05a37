import { readFileSync } from 'node:fs';
import { defineConfig } from 'vitest/config';

/** Shared vitest setup: `.wgsl` imports load as text (as esbuild's text loader does in builds), and
 *  workspace packages resolve to their TypeScript sources through the `source` export condition. */
export default defineConfig({
  plugins: [
    {
      name: 'wgsl-text',
      enforce: 'pre',
      load(id: string) {
        if (id.endsWith('.wgsl')) return `export default ${JSON.stringify(readFileSync(id, 'utf8'))};`;
        return null;
      },
    },
  ],
  resolve: { conditions: ['source', 'import', 'module', 'node', 'default'] },
  ssr: { resolve: { conditions: ['source', 'import', 'module', 'node', 'default'] } },
  test: {
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 120_000,
    env: { RUSTY_SAFE: '1' },
  },
});
