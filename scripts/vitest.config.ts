import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import SlowestFirst from './test-sequencer.js';

const root = fileURLToPath(new URL('..', import.meta.url));

export default defineConfig({
  test: {
    root,
    environment: 'node',
    pool: 'forks',
    // Two cores: more workers only fight over them. Cluster suites bound their own size.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    include: ['test/**/*.test.ts'],
    reporters: ['default', './scripts/summary-reporter.ts'],
    // The agent bundled once, for every spawned daemon and CLI process (scripts/agent-build.ts).
    globalSetup: ['./scripts/agent-build.ts'],
    // The slowest suites first, so that two workers end together (scripts/test-sequencer.ts).
    sequence: { sequencer: SlowestFirst },
  },
});
