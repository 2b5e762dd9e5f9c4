import { describe, expect, it } from 'vitest';
import { runChaos } from '../../src/testing/chaos.js';
import { describeAnomaly } from '../../src/testing/history.js';

// The short form of `npm run chaos`: every kind of fault once, under load.
describe('fault injection (short form of npm run chaos)', () => {
  it('loses no acknowledged write and converges after every fault', async () => {
    // The load paced for a suite that shares two cores: still hundreds of writes around each fault.
    const report = await runChaos({ faults: 4, convergeTimeoutMs: 45_000, pauseMs: 60 });
    expect(report.faults.map((f) => f.kind).sort()).toEqual(['cut-link', 'freeze-secondary', 'kill-primary', 'kill-secondary']);
    expect(report.faults.filter((f) => !f.converged)).toEqual([]);
    expect(report.lost).toEqual([]);
    expect(report.resurrected).toEqual([]);
    expect(report.leaked).toEqual([]);
    expect(report.bad).toEqual([]);
    expect(report.writes.acknowledged).toBeGreaterThan(100);
    // What readers saw: linearizable at the primary, their own writes, monotonic, nothing resurrected.
    expect(report.history.anomalies.map((a) => describeAnomaly(a))).toEqual([]);
    expect(report.history.operations).toBeGreaterThan(500);
    console.log(`history: ${report.history.operations} operations checked, ${report.history.anomalies.length} anomalies`);
  }, 240_000);
});
