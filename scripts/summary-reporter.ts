import type { Reporter, TestModule } from 'vitest/node';

/**
 * Ends the run with one plain line CI can read:
 *   tests: N passed, N failed, N skipped
 * A test file that fails outside its tests (it does not load, a hook throws or
 * times out) counts as one failed test, so such a run can never look green.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const mod of testModules) {
      let failedHere = 0;
      for (const test of mod.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failedHere++;
        else skipped++;
      }
      // A file that failed without a failing test (load error, a hook that threw or
      // timed out) still counts as one failure.
      failed += failedHere > 0 || mod.ok() ? failedHere : 1;
    }
    failed += unhandledErrors.length;
    process.stdout.write(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
