/**
 * `npm run upgrade-drill`: the previous release built from this repository (scripts/previous-release.ts), then three
 * datacenters run from it and upgraded, rolled back and upgraded again one server at a time under load
 * (src/testing/upgrade-drill.ts); prints each step and the figures, and exits 1 when one is not what it must be.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { runUpgradeDrill } from '../src/testing/upgrade-drill.js';

const previous = execFileSync(process.execPath, ['--import', 'tsx', join(import.meta.dirname, 'previous-release.ts')], {
  encoding: 'utf8',
  stdio: ['ignore', 'pipe', 'inherit'],
}).trim();
const out = (line: string) => process.stdout.write(`${line}\n`);
out(`upgrade drill: the previous release from ${previous}`);
const r = await runUpgradeDrill({ previous, log: out, ...(process.env.DRILL_LOG_DIR ? { logDir: process.env.DRILL_LOG_DIR } : {}) });
const longest = Math.max(0, ...r.steps.map((s) => s.windowMs));
out('');
out(`steps: ${r.steps.length}, ${(r.durationMs / 1000).toFixed(0)} s in all`);
for (const s of r.steps) out(`  ${s.step}: refusal window ${s.windowMs} ms (${s.refused} refused${s.election ? ', a leader election' : ''})`);
out(`acknowledged writes: ${r.writes.acknowledged} (${r.writes.ambiguous} answered without a clear outcome)`);
out(`acknowledged writes lost: ${r.lost.length}`);
for (const l of r.lost.slice(0, 20)) out(`  ${l}`);
out(`requests refused outside a leader election: ${r.refusedOutsideElection}`);
out(`longest refusal window of a step: ${longest} ms`);
out(`history: ${r.anomalies.length} anomalies`);
for (const a of r.anomalies.slice(0, 20)) out(`  ${a}`);
out(`enforcing-client decisions wrong: ${r.wrongDecisions.length}`);
for (const w of r.wrongDecisions.slice(0, 20)) out(`  ${w}`);
out(
  `rolled back: ${r.rolledBack.datacenter} on the previous release served ${r.rolledBack.tokens - r.rolledBack.missing.length} of the ${r.rolledBack.tokens} tokens it had`,
);
out(`servers that did not stop on SIGTERM within 20 s (killed): ${r.stuck.length}`);
for (const x of r.stuck) out(`  ${x}`);
out(`finalized: ${r.finalized ? `${r.finalized.Release} (replication ${r.finalized.Replication}, servers ${r.finalized.Servers})` : 'no'}`);
const ok =
  r.lost.length === 0 &&
  r.refusedOutsideElection === 0 &&
  r.anomalies.length === 0 &&
  r.wrongDecisions.length === 0 &&
  r.rolledBack.missing.length === 0 &&
  r.finalized !== null;
process.exit(ok ? 0 : 1);
