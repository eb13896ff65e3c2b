// Builds the pages into dist/ (embedded in the server binary by shared/build.rs). The
// Content-Security-Policy the server sends allows no inline script or style, so nothing
// may be inlined: no module-preload polyfill, no inlined assets.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    sourcemap: false,
  },
  test: {
    include: ['src/**/*.test.ts'],
    environment: 'node',
  },
});
