/**
 * npm run bench: starts a daemon on a temp data dir, loads it with autocannon and prints
 * req/s, p50 and p99 for the hot paths, beside a bare Fastify route for comparison.
 * Writes the figures as JSON to bench-results/. Bounded: every scenario runs for
 * BENCH_DURATION seconds (default 10) with BENCH_CONNECTIONS connections (default 50).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { startDaemonProcess, stopDaemonProcess } from './daemon-process.js';
import { tokenHash } from '../src/domain/hash.js';
import { generateID } from '../src/domain/ids.js';
import { LevelStore } from '../src/store/level-store.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const TOKENS = Number(process.env.BENCH_TOKENS ?? 100_000);
const SECRET = 'bench-management-secret';

interface Row {
  scenario: string;
  reqPerSec: number;
  p50ms: number;
  p99ms: number;
  errors: number;
  non2xx: number;
}

function startProcess(args: string[]): { proc: ChildProcess; firstLine: Promise<string> } {
  const proc = spawn(process.execPath, ['--import', 'tsx', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  const firstLine = new Promise<string>((resolve, reject) => {
    let buf = '';
    proc.stdout?.on('data', (b: Buffer) => {
      buf += b.toString();
      if (buf.includes('\n')) resolve(buf.split('\n')[0] as string);
    });
    proc.once('exit', (code) => reject(new Error(`process exited early with ${code}`)));
  });
  return { proc, firstLine };
}

const startDaemon = (dataDir: string, extra: string[] = ['--initial-management-token', SECRET]) =>
  startDaemonProcess(dataDir, extra, process.env.BENCH_DAEMON_LOGS);
const stop = stopDaemonProcess;

async function load(scenario: string, opts: autocannon.Options): Promise<Row> {
  const result = await autocannon({ connections: CONNECTIONS, duration: DURATION, ...opts });
  return {
    scenario,
    reqPerSec: Math.round(result.requests.average),
    p50ms: result.latency.p50,
    p99ms: result.latency.p99,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
  };
}

const RATE = Number(process.env.BENCH_REPLICATION_RATE ?? 500);
const LAG_SECONDS = Number(process.env.BENCH_REPLICATION_SECONDS ?? 5);


async function replicationStatus(url: string): Promise<{ ReplicatedIndex: number; Connected: boolean }> {
  return (await (await fetch(`${url}/v1/acl/replication`)).json()) as { ReplicatedIndex: number; Connected: boolean };
}

/** Cumulative buckets of a Prometheus histogram, from the text format. */
async function histogram(url: string, name: string): Promise<Array<[number, number]>> {
  const text = await (await fetch(`${url}/v1/agent/metrics?format=prometheus`)).text();
  const out: Array<[number, number]> = [];
  for (const m of text.matchAll(new RegExp(`^${name}_bucket\\{le="([^"]+)"\\} (\\d+)$`, 'gm'))) {
    out.push([m[1] === '+Inf' ? Infinity : Number(m[1]), Number(m[2])]);
  }
  return out;
}

/** A quantile from cumulative bucket counts, interpolating inside the bucket (as Prometheus does). */
function quantile(buckets: Array<[number, number]>, q: number): number {
  const total = buckets[buckets.length - 1]?.[1] ?? 0;
  const rank = q * total;
  let prevBound = 0;
  let prevCount = 0;
  for (const [bound, count] of buckets) {
    if (count >= rank) {
      if (!Number.isFinite(bound)) return prevBound;
      return prevBound + ((bound - prevBound) * (rank - prevCount)) / Math.max(1, count - prevCount);
    }
    prevBound = bound;
    prevCount = count;
  }
  return Number.NaN;
}

/**
 * Starts a fresh secondary of `primaryURL` and measures (1) how long it takes to catch
 * up on everything the primary holds, then (2) replication lag under RATE global
 * writes/s for LAG_SECONDS: per write, the time from durable (acknowledged) on the
 * primary until applied, and so readable, on the secondary. The secondary measures it
 * itself (watchword_replication_apply_lag_seconds); both daemons share this clock.
 */
async function replicationBench(primaryURL: string): Promise<Record<string, number>> {
  const dir = await mkdtemp(join(tmpdir(), 'watchword-bench-dc2-'));
  const started = performance.now();
  const dc2 = await startDaemon(dir, ['--datacenter', 'dc2', '--primary-datacenter', 'dc1', '--primary-address', primaryURL, '--replication-token', SECRET]);
  try {
    const caughtUp = async (target: number, limitMs: number) => {
      const deadline = performance.now() + limitMs;
      for (;;) {
        const s = await replicationStatus(dc2.url);
        if (s.Connected && s.ReplicatedIndex >= target) return;
        if (performance.now() > deadline) throw new Error(`secondary did not reach index ${target} within ${limitMs} ms`);
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    await caughtUp(((await (await fetch(`${primaryURL}/v1/internal/index`)).json()) as { Index: number }).Index, 120_000);
    const catchUpMs = performance.now() - started;
    // Lag is a steady-state figure: let the fresh secondary settle after its snapshot.
    await new Promise((r) => setTimeout(r, Number(process.env.BENCH_SETTLE_MS ?? 2000)));

    const metric = 'watchword_replication_apply_lag_seconds';
    const before = await histogram(dc2.url, metric);
    const indexes: number[] = [];
    const pending: Array<Promise<void>> = [];
    const total = RATE * LAG_SECONDS;
    const headers = { 'X-Service-Token': SECRET, 'Content-Type': 'application/json' };
    const t0 = performance.now();
    for (let i = 0; i < total; i++) {
      const wait = t0 + (i * 1000) / RATE - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      pending.push(
        fetch(`${primaryURL}/v1/acl/token`, { method: 'PUT', headers, body: '{"Description":"replicated"}' }).then(async (res) => {
          await res.arrayBuffer();
          indexes.push(Number(res.headers.get('x-service-index')));
        }),
      );
    }
    await Promise.all(pending);
    const achievedRate = total / ((performance.now() - t0) / 1000);
    await caughtUp(Math.max(...indexes), 60_000);
    const after = await histogram(dc2.url, metric);
    const delta = after.map(([le, n], i) => [le, n - (before[i]?.[1] ?? 0)] as [number, number]);
    const count = delta[delta.length - 1]?.[1] ?? 0;
    const within100 = delta.find(([le]) => le === 0.1)?.[1] ?? 0;
    return {
      catchUpMs,
      tokens: TOKENS,
      writes: total,
      achievedRate,
      applied: count,
      lagP50ms: quantile(delta, 0.5) * 1000,
      lagP99ms: quantile(delta, 0.99) * 1000,
      within100msShare: count > 0 ? within100 / count : Number.NaN,
    };
  } finally {
    await stop(dc2.proc);
    await rm(dir, { recursive: true, force: true });
  }
}

/** Writes TOKENS tokens straight into the store; 10 of them link `policyID`. */
async function seed(dataDir: string, policyID: string): Promise<void> {
  const store = await LevelStore.open(join(dataDir, 'store'), { durability: 'os', changeLog: true });
  const now = new Date().toISOString();
  const batch = 2000;
  for (let done = 0; done < TOKENS; done += batch) {
    await store.transact((tx) => {
      for (let i = done; i < Math.min(done + batch, TOKENS); i++) {
        const linked = i % Math.floor(TOKENS / 10) === 0;
        const base = {
          Description: `seeded ${i}`,
          Policies: linked ? [{ ID: policyID }] : [],
          Roles: [],
          ServiceIdentities: [{ ServiceName: `svc-${i % 1000}` }],
          NodeIdentities: [],
          TemplatedPolicies: [],
          Local: false,
        };
        tx.putToken({ AccessorID: generateID(), SecretID: generateID(), ...base, AuthMethod: '', CreateTime: now, Hash: tokenHash(base), Namespace: 'default', Partition: 'default' });
      }
    });
  }
  await store.close();
}

async function main(): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), 'watchword-bench-'));
  const procs: ChildProcess[] = [];
  try {
    // 1. Start once to create the built-ins and a policy, then seed the store offline.
    let daemon = await startDaemon(dataDir);
    const headers = { 'X-Service-Token': SECRET, 'Content-Type': 'application/json' };
    const policy = (await (await fetch(`${daemon.url}/v1/acl/policy`, { method: 'PUT', headers, body: JSON.stringify({ Name: 'bench-x', Rules: 'acl = "read"' }) })).json()) as { ID: string };
    await stop(daemon.proc);
    const seedStart = Date.now();
    await seed(dataDir, policy.ID);
    process.stdout.write(`seeded ${TOKENS} tokens in ${((Date.now() - seedStart) / 1000).toFixed(1)} s\n`);

    daemon = await startDaemon(dataDir);
    procs.push(daemon.proc);
    const self = (await (await fetch(`${daemon.url}/v1/acl/token/self`, { headers })).json()) as { AccessorID: string };
    const check = (await (await fetch(`${daemon.url}/v1/acl/tokens?policy=${policy.ID}`, { headers })).json()) as unknown[];
    if (check.length !== 10) throw new Error(`expected 10 tokens for the policy filter, got ${check.length}`);

    const baseline = startProcess(['scripts/bench-baseline.ts']);
    procs.push(baseline.proc);
    const baselinePort = await baseline.firstLine;

    const rows: Row[] = [];
    rows.push(await load('bare Fastify route, constant token JSON', { url: `http://127.0.0.1:${baselinePort}/baseline` }));
    rows.push(await load('token read by accessor (management token)', { url: `${daemon.url}/v1/acl/token/${self.AccessorID}`, headers }));
    rows.push(await load(`token list ?policy=X (10 of ${TOKENS})`, { url: `${daemon.url}/v1/acl/tokens?policy=${policy.ID}`, headers }));
    rows.push(await load('token create (fsync, group commit)', { url: `${daemon.url}/v1/acl/token`, method: 'PUT', headers, body: '{"Description":"bench"}' }));

    console.table(rows);
    const replication = await replicationBench(daemon.url);
    console.table([
      { measure: `fresh secondary catches up on ${TOKENS} tokens (target < 20 s)`, value: `${(replication.catchUpMs! / 1000).toFixed(2)} s` },
      { measure: `replication lag at ${RATE} global writes/s, p50`, value: `${replication.lagP50ms!.toFixed(1)} ms` },
      { measure: `replication lag at ${RATE} global writes/s, p99 (target < 100 ms)`, value: `${replication.lagP99ms!.toFixed(1)} ms` },
      { measure: 'share of writes applied within 100 ms', value: `${(replication.within100msShare! * 100).toFixed(2)} %` },
      { measure: 'writes / applied on the secondary / achieved rate', value: `${replication.writes} / ${replication.applied} / ${replication.achievedRate!.toFixed(0)} per s` },
    ]);
    const outDir = join(ROOT, 'bench-results');
    await mkdir(outDir, { recursive: true });
    const file = join(outDir, `bench-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    const report = { date: new Date().toISOString(), node: process.version, durationSeconds: DURATION, connections: CONNECTIONS, tokens: TOKENS, rows, replication };
    await writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
    process.stdout.write(`wrote ${file}\n`);
  } finally {
    for (const p of procs) await stop(p);
    await rm(dataDir, { recursive: true, force: true });
  }
}

await main();
