import { defineConfig } from 'tsup';

export default defineConfig({
  // the benchmark programs build beside the library (`rusty bench` runs dist/*bench*.js)
  entry: { index: 'src/index.ts', 'load-bench': 'src/bench/load-bench.ts', 'tokenizer-bench': 'src/bench/tokenizer-bench.ts' },
  format: ['esm'],
  dts: { entry: 'src/index.ts' },
  clean: true,
  sourcemap: true,
  target: 'node20',
  loader: { '.wgsl': 'text' },
});
