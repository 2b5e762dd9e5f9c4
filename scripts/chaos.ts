/**
 * npm run chaos: CHAOS_FAULTS faults (default 21: every kind three times) against three
 * datacenters under load; prints a table of the faults with their convergence times and
 * the checks of every acknowledged write. Exits non-zero when a check fails.
 * Bounded: a 10-minute overall deadline.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runChaos } from './chaos-run.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const deadline = setTimeout(() => {
  process.stderr.write('chaos: overall deadline of 10 minutes passed\n');
  process.exit(2);
}, 10 * 60_000);

const report = await runChaos({ faults: Number(process.env.CHAOS_FAULTS ?? 21), log: (line) => process.stdout.write(`${line}\n`) });
console.table(report.faults.map((f) => ({ fault: f.n, kind: f.kind, target: f.target, 'held s': (f.heldMs / 1000).toFixed(1), 'converged in s': f.converged ? (f.convergedMs / 1000).toFixed(2) : 'no' })));
const checks = [
  { check: 'faults injected (every kind)', value: `${report.faults.length} (${[...new Set(report.faults.map((f) => f.kind))].join(', ')})`, ok: report.faults.length >= Number(process.env.CHAOS_FAULTS ?? 21) },
  { check: 'every fault converged', value: `${report.faults.filter((f) => f.converged).length} of ${report.faults.length}`, ok: report.faults.every((f) => f.converged) },
  { check: 'median convergence < 5 s', value: `${(report.medianConvergenceMs / 1000).toFixed(2)} s`, ok: report.medianConvergenceMs < 5000 },
  { check: 'acknowledged writes lost', value: String(report.lost.length), ok: report.lost.length === 0 },
  { check: 'acknowledged deletes undone', value: String(report.resurrected.length), ok: report.resurrected.length === 0 },
  { check: 'Local tokens outside their datacenter', value: String(report.leaked.length), ok: report.leaked.length === 0 },
  { check: 'answers other than 2xx, 503 or a cut connection', value: String(report.bad.length), ok: report.bad.length === 0 },
  { check: 'writes acknowledged / ambiguous (503 or cut) / deletes', value: `${report.writes.acknowledged} / ${report.writes.ambiguous} / ${report.writes.deletes}`, ok: true },
  { check: 'run took', value: `${(report.durationMs / 1000).toFixed(0)} s`, ok: report.durationMs < 10 * 60_000 },
];
console.table(checks);
for (const line of [...report.lost, ...report.resurrected, ...report.leaked, ...report.bad].slice(0, 20)) process.stdout.write(`  ${line}\n`);
await mkdir(join(ROOT, 'bench-results'), { recursive: true });
await writeFile(join(ROOT, 'bench-results', `chaos-${new Date().toISOString().replace(/[:.]/g, '-')}.json`), `${JSON.stringify({ report, checks }, null, 2)}\n`);
clearTimeout(deadline);
if (checks.some((c) => !c.ok)) process.exitCode = 1;
