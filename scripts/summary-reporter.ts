import type { Reporter, TestModule } from 'vitest/node';

/**
 * Ends the run with one plain line CI can read:
 *   tests: N passed, N failed, N skipped
 * A test file that fails outside its tests (it does not load, a hook throws or
 * times out) counts as one failed test, so such a run can never look green.
 * Before it, each failure on a plain line of its own (no colours), `FAIL file > test: why`,
 * so a log read with grep or its last lines names every failing test.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    const named: string[] = [];
    for (const mod of testModules) {
      let failedHere = 0;
      const file = mod.relativeModuleId;
      for (const test of mod.children.allTests()) {
        const result = test.result();
        if (result.state === 'passed') passed++;
        else if (result.state === 'failed') {
          failedHere++;
          named.push(`FAIL ${file} > ${test.fullName}: ${firstLine(result.errors?.[0]?.message)}`);
        } else skipped++;
      }
      // A file that failed without a failing test (load error, a hook that threw or
      // timed out) still counts as one failure.
      if (failedHere === 0 && !mod.ok()) {
        failedHere = 1;
        named.push(`FAIL ${file}: ${firstLine(mod.errors()[0]?.message)}`);
      }
      failed += failedHere;
    }
    for (const err of unhandledErrors) named.push(`FAIL (unhandled error): ${firstLine((err as { message?: string }).message)}`);
    failed += unhandledErrors.length;
    if (named.length > 0) process.stdout.write(`\n${named.join('\n')}\n`);
    process.stdout.write(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}

/** An error's first line, without colour codes, cut to a line's worth. */
function firstLine(message: string | undefined): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the escape that starts a colour code
  const plain = (message ?? 'no message').replace(/\x1b\[[0-9;]*m/g, '');
  return (plain.split('\n')[0] ?? '').slice(0, 300);
}
