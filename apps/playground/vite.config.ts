import { defineConfig, type Plugin } from 'vite';

/**
 * Fail the build when a module the page loads at start-up (the entry chunk and what it imports statically)
 * contains a Node built-in: the packages must keep `node:*` behind dynamic imports on their Node paths.
 */
function noNodeAtLoad(): Plugin {
  return {
    name: 'rusty-no-node-at-load',
    apply: 'build',
    generateBundle(_, bundle) {
      const chunks = new Map(Object.values(bundle).filter((c) => c.type === 'chunk').map((c) => [c.fileName, c]));
      const seen = new Set<string>();
      const queue = [...chunks.values()].filter((c) => c.isEntry).map((c) => c.fileName);
      while (queue.length) {
        const name = queue.pop()!;
        if (seen.has(name)) continue;
        seen.add(name);
        const c = chunks.get(name);
        if (!c || c.type !== 'chunk') continue;
        const bad = c.moduleIds.filter((id) => id.includes('__vite-browser-external') || /^node:/.test(id));
        if (bad.length) this.error(`${name} loads Node built-ins at start-up: ${bad.join(', ')} (import them dynamically on the Node path)`);
        queue.push(...c.imports);
      }
    },
  };
}

export default defineConfig({
  base: './',
  plugins: [noNodeAtLoad()],
  build: {
    target: 'es2022',
    // class names stay readable: the page shows errors by their type (ConfigError, SafetensorsError, ...)
    minify: false,
    sourcemap: true,
    chunkSizeWarningLimit: 4096,
  },
  server: { host: '127.0.0.1' },
  preview: { host: '127.0.0.1' },
});
