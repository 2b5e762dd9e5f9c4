/**
 * npm run bench:recording: what noting the checks asked (for dry runs; docs/operator-insight.md, "What a change
 * would break") costs the decision endpoint, and what reporting decisions costs the enforcing
 * client. The decision bench (bench-authorize.ts: authorize with 1 and 16 checks against the bare
 * Fastify route, daemon on CPU 1, load on CPU 0, the median of BENCH_ROUNDS alternating rounds) runs
 * on a fresh store with `--recent-checks false`, then on another with it on (the default); each
 * gives its ratio to the bare route measured in the same run. Floor: the ratio with recording on
 * at least 0.9x the ratio without, for 1 and for 16 checks. The enforcing client's 1,000,000
 * allowed() calls are timed without and with its reports. Writes bench-results/recording.json;
 * exits non-zero when the floor is missed.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type AuthorizeBench, authorizeBench } from './bench-authorize.js';
import { startDaemonProcess, stopDaemonProcess, useBuiltDaemon } from './daemon-process.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DURATION = Number(process.env.BENCH_DURATION ?? 6);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const ROUNDS = Math.max(3, Number(process.env.BENCH_ROUNDS ?? 3));
const SECRET = 'bench-recording-management-secret';
const FLOOR = 0.9;
useBuiltDaemon();

/** A fresh data dir holding the management token. */
async function freshStore(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'watchword-recording-'));
  const d = await startDaemonProcess(dir, ['--initial-management-token', SECRET]);
  await stopDaemonProcess(d.proc);
  return dir;
}

async function run(recording: boolean): Promise<AuthorizeBench> {
  const dir = await freshStore();
  try {
    return await authorizeBench(dir, SECRET, {
      seconds: DURATION,
      rounds: ROUNDS,
      connections: CONNECTIONS,
      flags: ['--recent-checks', String(recording)],
      reportDecisions: recording,
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const off = await run(false);
  const on = await run(true);
  const ratio = (r: AuthorizeBench, k: 'one' | 'sixteen') => r[k].reqPerSec / r.bare.reqPerSec;
  const rows = (['one', 'sixteen'] as const).map((k) => {
    const relative = ratio(on, k) / ratio(off, k);
    return {
      scenario: `authorize, ${k === 'one' ? '1 check' : '16 checks'}`,
      'ratio to bare, recording off': `${ratio(off, k).toFixed(2)}x`,
      'ratio to bare, recording on': `${ratio(on, k).toFixed(2)}x`,
      'on / off': relative.toFixed(3),
      target: `>= ${FLOOR}`,
      ok: relative >= FLOOR,
    };
  });
  process.stdout.write(`decisions: median of ${on.rounds} alternating rounds each; ${on.pinned ? 'servers on CPU 1, load generator on CPU 0' : 'not pinned'}\n`);
  console.table(rows);
  process.stdout.write(
    `enforcing client, 1,000,000 allowed(): ${off.enforcing.medianMs} ms without reports, ${on.enforcing.medianMs} ms with them\n`,
  );
  await mkdir(join(ROOT, 'bench-results'), { recursive: true });
  await writeFile(join(ROOT, 'bench-results', 'recording.json'), `${JSON.stringify({ off, on, rows }, null, 2)}\n`);
  if (rows.some((r) => !r.ok)) process.exitCode = 1;
}

await main();
