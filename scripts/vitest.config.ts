import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const root = fileURLToPath(new URL('..', import.meta.url));

export default defineConfig({
  test: {
    root,
    include: ['test/**/*.test.ts'],
    environment: 'node',
    pool: 'forks',
    // Two cores: more workers only fight over them. Cluster suites bound their own size.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    reporters: ['default', './scripts/summary-reporter.ts'],
  },
});
