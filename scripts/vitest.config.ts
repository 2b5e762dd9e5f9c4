import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const root = fileURLToPath(new URL('..', import.meta.url));

/** Suites that load the whole machine: they run after everything else, one at a time. */
const HEAVY = ['test/e2e/chaos.test.ts'];

export default defineConfig({
  test: {
    root,
    environment: 'node',
    pool: 'forks',
    // Two cores: more workers only fight over them. Cluster suites bound their own size.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    reporters: ['default', './scripts/summary-reporter.ts'],
    // The agent bundled once, for every spawned daemon and CLI process (scripts/agent-build.ts).
    globalSetup: ['./scripts/agent-build.ts'],
    projects: [
      { extends: true, test: { name: 'main', include: ['test/**/*.test.ts'], exclude: HEAVY } },
      { extends: true, test: { name: 'faults', include: HEAVY, sequence: { groupOrder: 1 } } },
    ],
  },
});
