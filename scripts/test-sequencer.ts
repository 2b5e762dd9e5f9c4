import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The slowest suites, slowest first (seconds on a 2-core machine). A few workers share the
 * suite (scripts/vitest.config.ts); a long suite that starts last runs alone at the end. vitest
 * orders by the durations it cached on the last run, which a fresh clone has not got (it
 * then starts the largest files first, and these are small): so these start first, then
 * vitest's own order for the rest.
 */
const SLOWEST = [
  'test/e2e/etcd-restart.test.ts', // 54: five etcd crashes of 4 s and one of 15 s
  'test/e2e/chaos.test.ts', // 33
  'test/e2e/ha.test.ts', // 33
  'test/e2e/convergence.test.ts', // 26
  'test/e2e/replication-failures.test.ts', // 24
  'test/e2e/tls.test.ts', // 17
  'test/e2e/startup-safety.test.ts', // 15
];

export default class SlowestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rest = await super.sort(files);
    const rank = (f: TestSpecification) => {
      const i = SLOWEST.findIndex((s) => f.moduleId.endsWith(s));
      return i < 0 ? SLOWEST.length : i;
    };
    // A stable sort: vitest's order among the others is kept.
    return [...rest].sort((a, b) => rank(a) - rank(b));
  }
}
