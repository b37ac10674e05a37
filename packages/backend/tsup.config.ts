import { defineConfig } from 'tsup';

export default defineConfig({
  // the benchmark programs build beside the library (`rusty bench` runs dist/*bench*.js)
  entry: { index: 'src/index.ts', bench: 'src/bench/bench.ts', 'llm-bench': 'src/bench/llm-bench.ts', 'attention-bench': 'src/bench/attention-bench.ts', 'optim-bench': 'src/bench/optim-bench.ts' },
  format: ['esm'],
  dts: { entry: 'src/index.ts' },
  clean: true,
  sourcemap: true,
  target: 'node20',
  loader: { '.wgsl': 'text' },
});
