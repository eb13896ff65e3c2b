// The browser tests: the real server binary, real Terraform and Debian's Chromium, one file
// at a time (each starts its own server), with timeouts long enough for terraform init.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['e2e/**/*.test.ts'],
    environment: 'node',
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
