import type { Reporter, TestModule } from 'vitest/node';

/**
 * Ends the run with one plain line CI can read:
 *   tests: N passed, N failed, N skipped
 * A test file that fails to load counts as one failed test, so a broken file can
 * never look like a green run.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const mod of testModules) {
      let count = 0;
      for (const test of mod.children.allTests()) {
        count++;
        const state = test.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failed++;
        else skipped++;
      }
      if (mod.state() === 'failed' && count === 0) failed++;
      else if (mod.errors().length > 0 && !mod.ok()) failed += count === 0 ? 1 : 0;
    }
    failed += unhandledErrors.length;
    process.stdout.write(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
