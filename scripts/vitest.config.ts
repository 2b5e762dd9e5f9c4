import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import SlowestFirst from './test-sequencer.js';

const root = fileURLToPath(new URL('..', import.meta.url));

export default defineConfig({
  test: {
    root,
    environment: 'node',
    pool: 'forks',
    // Four workers on two cores: the long suites mostly wait (killed servers, leases, a
    // datacenter held down), and the others fill those waits: 141-151 s for the whole suite
    // here against 171-177 s with three. Cluster suites bound their own size.
    maxWorkers: 4,
    // A worker keeps the modules it has imported from one file to the next: importing the
    // app (Fastify, zod's schemas, the store) again for each of a hundred files cost about
    // 100 s of the suite's CPU. Files share no state through modules (every daemon, store
    // and registry is built per test); a test that patches a global puts it back.
    isolate: false,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    include: ['test/**/*.test.ts'],
    reporters: ['default', './scripts/summary-reporter.ts'],
    // The agent bundled once, for every spawned daemon and CLI process (scripts/agent-build.ts).
    globalSetup: ['./scripts/agent-build.ts'],
    // The slowest suites first, so that the workers end together (scripts/test-sequencer.ts).
    sequence: { sequencer: SlowestFirst },
  },
});
