// npm run simulate -- --seeds N [--seed S] [--duration MS] [--verbose]: whole datacenters simulated from
// seeds (src/testing/simulation): elections, leaders, followers, etcd and disks on a fake
// clock under a seeded schedule of faults. Ends with `simulate: N seeds, F failures`.
import { parseArgs } from 'node:util';
import { simulate } from '../src/testing/simulation/datacenter.js';

const { values } = parseArgs({
  options: {
    seeds: { type: 'string', default: '100' },
    seed: { type: 'string' },
    from: { type: 'string', default: '1' },
    duration: { type: 'string', default: '30000' },
    verbose: { type: 'boolean', default: false },
  },
});

const seeds = values.seed !== undefined ? [Number(values.seed)] : Array.from({ length: Number(values.seeds) }, (_, i) => Number(values.from) + i);
const durationMs = Number(values.duration);
const started = performance.now();
let failures = 0;
let acknowledged = 0;
let leaderships = 0;
for (const seed of seeds) {
  const r = await simulate({ seed, durationMs });
  acknowledged += r.acknowledged;
  leaderships += r.leaderships;
  if (r.failures.length > 0) {
    failures++;
    console.log(`seed ${seed}: ${r.failures.length} failure(s)`);
    for (const f of r.failures) console.log(`  ${f}`);
    console.log(`  faults: ${(values.verbose ? r.faults : r.faults.slice(-8)).join('; ')}`);
    console.log(`  reproduce with --seed ${seed}`);
  } else if (values.verbose) {
    console.log(`seed ${seed}: ok (${r.acknowledged} of ${r.writes} writes acknowledged, ${r.leaderships} leaderships, ${r.faults.length} faults)`);
  }
}
const seconds = (performance.now() - started) / 1000;
console.log(`${acknowledged} acknowledged writes checked across ${leaderships} leaderships in ${seconds.toFixed(1)} s`);
console.log(`simulate: ${seeds.length} seeds, ${failures} failures`);
process.exitCode = failures > 0 ? 1 : 0;
