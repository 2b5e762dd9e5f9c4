import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The slowest suites, slowest first (seconds on a 2-core machine). A few workers share the
 * suite (scripts/vitest.config.ts); a long suite that starts last runs alone at the end. vitest
 * orders by the durations it cached on the last run, which a fresh clone has not got (it
 * then starts the largest files first, and these are small): so these start first, then
 * vitest's own order for the rest.
 */
const SLOWEST = [
  'test/e2e/etcd-restart.test.ts', // 59: five etcd crashes of 4 s and one of 15 s
  'test/e2e/ha.test.ts', // 45-53
  'test/release/mixed-versions.test.ts', // 45: the previous release's daemons beside this one's
  'test/e2e/power-cut.test.ts', // 25-33: five power cuts on LazyFS, one of a whole HA datacenter
  'test/e2e/ui.test.ts', // 35-40
  'test/ha/simulation.test.ts', // 30-40
  'test/e2e/catch-up.test.ts', // 33-39
  'test/e2e/replication-failures.test.ts', // 35
  'test/e2e/chaos.test.ts', // 33
  'test/e2e/convergence.test.ts', // 33
  'test/security/max-stale-every-server.test.ts', // 26
  'test/e2e/tls.test.ts', // 21
  'test/security/unproven-leader.test.ts', // 15
  'test/e2e/max-stale.test.ts', // 15
  'test/e2e/harness-hygiene.test.ts', // 12-15
  'test/e2e/startup-safety.test.ts', // 12
  'test/e2e/primary-loss.test.ts', // 6-10
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
