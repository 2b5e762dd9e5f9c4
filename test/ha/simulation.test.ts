import { randomInt } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { simulate } from '../../src/testing/simulation/datacenter.js';

// Whole datacenters from seeds (src/testing/simulation): the real election, leader, sessions,
// follower core and group commit over in-memory links, a model of etcd and simulated disks, on
// a fake clock under seeded faults. `npm run simulate -- --seeds 10000` runs many more.

/** 40 a run (~7 s of one core): the suite keeps to its three minutes, and the seeds rotate. */
const SEEDS = 40;
/**
 * The seeds rotate: each run takes SEEDS new ones from a random start (printed), so that runs
 * over time cover many more than one run does. WATCHWORD_SIM_SEED=N replays a run's seeds.
 */
const FIRST = Number(process.env.WATCHWORD_SIM_SEED ?? randomInt(1, 2 ** 31 - SEEDS));

describe('a datacenter simulated from seeds', () => {
  it(`loses no acknowledged write, never has two leaders acknowledging in a term, and converges, for ${SEEDS} seeds`, async () => {
    const failed: string[] = [];
    let acknowledged = 0;
    console.log(`simulation seeds ${FIRST}..${FIRST + SEEDS - 1} (replay them with WATCHWORD_SIM_SEED=${FIRST})`);
    for (let seed = FIRST; seed < FIRST + SEEDS; seed++) {
      const r = await simulate({ seed, durationMs: 12_000, settleMs: 12_000 });
      acknowledged += r.acknowledged;
      if (r.failures.length > 0)
        failed.push(`seed ${r.seed}: ${r.failures.join('; ')} (reproduce with npm run simulate -- --seed ${r.seed} --duration 12000)`);
    }
    expect(failed, `seeds ${FIRST}..${FIRST + SEEDS - 1} (WATCHWORD_SIM_SEED=${FIRST})`).toEqual([]);
    // The runs did work: writes were acknowledged through the faults.
    expect(acknowledged).toBeGreaterThan(SEEDS * 100);
  }, 240_000);

  it('keeps the acknowledged writes of seed 72, which lost one when a hello position counted before the batch log check', async () => {
    // Seed 72 kills its leader 1 ms after a batch (a follower keeps a batch the next leader
    // never wrote), then the next leader 7 ms after it began a snapshot for that follower.
    // With leader-session.ts counting the follower's hello position before checking it is in
    // the leader's batch log, the follower joined the synchronous set on batches it did not
    // hold, and led next without w87. The schedule is part of the check: if the simulation's
    // faults change, the seed that shows it may change too.
    const r = await simulate({ seed: 72 });
    expect(r.faults.join('\n')).toMatch(/kill s3 \d+ ms after a batch[\s\S]*kill s3 \d+ ms after a snapshot began/);
    expect(r.failures).toEqual([]);
  });

  it('is deterministic: the same seed gives the same run', async () => {
    const a = await simulate({ seed: 42, durationMs: 8_000 });
    const b = await simulate({ seed: 42, durationMs: 8_000 });
    expect(b).toEqual(a);
    expect(a.faults.length).toBeGreaterThan(0);
  });

  it('reports an acknowledged write that a server lacks (its checks can fail)', async () => {
    const r = await simulate({ seed: 6, durationMs: 8_000, sabotage: 'erase-acknowledged' });
    expect(r.faults.some((f) => f.includes('sabotage'))).toBe(true);
    expect(r.failures.join('\n')).toMatch(/without \d+ acknowledged write|lacks \d+ acknowledged write|holds \d+ tokens/);
  });
});
