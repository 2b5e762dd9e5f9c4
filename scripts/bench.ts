/**
 * npm run bench: the performance contract (SPEC §11). Seeds BENCH_TOKENS tokens (default
 * 100,000) into a temp data dir, starts the daemon in its own process, loads it with
 * autocannon (BENCH_CONNECTIONS connections, default 32) and measures, in the same run,
 * the two baselines the figures are ratios to: a bare Fastify route returning a constant
 * token-sized JSON object, and raw LevelDB with 32 concurrent synced puts of a
 * token-sized value. Then replication: a fresh secondary's catch-up and the lag at
 * BENCH_REPLICATION_RATE global writes/s. Each scenario runs BENCH_ROUNDS rounds
 * (default 2) of BENCH_DURATION seconds (default 6); the median round is reported.
 * Prints a table with every target and writes the figures as JSON to bench-results/;
 * exits non-zero when a target is missed.
 */
import type { ChildProcess } from 'node:child_process';
import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { type ServersBench, serversBench } from './bench-servers.js';
import { type TlsBench, tlsBench } from './bench-tls.js';
import { type AuthorizeBench, authorizeBench } from './bench-authorize.js';
import { startProcess } from './bench-process.js';
import { startDaemonProcess, stopDaemonProcess } from './daemon-process.js';
import { policyHash, tokenHash } from '../src/domain/hash.js';
import { generateID } from '../src/domain/ids.js';
import { LevelStore } from '../src/store/level-store.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DURATION = Number(process.env.BENCH_DURATION ?? 6);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const TOKENS = Number(process.env.BENCH_TOKENS ?? 100_000);
/** Policies in the filter scenario; each is linked by 10 tokens. */
const FILTER_POLICIES = Math.min(1000, Math.floor(TOKENS / 100));
const SECRET = 'bench-management-secret';

interface Row {
  scenario: string;
  reqPerSec: number;
  p50ms: number;
  p99ms: number;
  errors: number;
  non2xx: number;
}

const startDaemon = (dataDir: string, extra: string[] = ['--initial-management-token', SECRET]) =>
  startDaemonProcess(dataDir, extra, process.env.BENCH_DAEMON_LOGS);
const stop = stopDaemonProcess;

/** The median of `rounds` by req/s (for two rounds: their mean). */
function median(scenario: string, rounds: Row[]): Row {
  const sorted = [...rounds].sort((a, b) => a.reqPerSec - b.reqPerSec);
  if (sorted.length % 2 === 1) return { ...(sorted[(sorted.length - 1) / 2] as Row), scenario };
  const a = sorted[sorted.length / 2 - 1] as Row;
  const b = sorted[sorted.length / 2] as Row;
  const mean = (x: number, y: number) => Math.round(((x + y) / 2) * 100) / 100;
  return { scenario, reqPerSec: Math.round((a.reqPerSec + b.reqPerSec) / 2), p50ms: mean(a.p50ms, b.p50ms), p99ms: mean(a.p99ms, b.p99ms), errors: a.errors + b.errors, non2xx: a.non2xx + b.non2xx };
}

async function load(scenario: string, opts: autocannon.Options): Promise<Row> {
  const rounds: Row[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const result = await autocannon({ connections: CONNECTIONS, duration: DURATION, ...opts });
    rounds.push({
      scenario,
      reqPerSec: Math.round(result.requests.average),
      p50ms: result.latency.p50,
      p99ms: result.latency.p99,
      errors: result.errors + result.timeouts,
      non2xx: result.non2xx,
    });
  }
  return median(scenario, rounds);
}

/** Raw LevelDB, 32 concurrent synced puts (scripts/bench-leveldb.ts in its own process). */
async function levelBaseline(): Promise<Row> {
  const rounds: Row[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const { proc, firstLine } = startProcess(['scripts/bench-leveldb.ts', String(DURATION), '32']);
    const r = JSON.parse(await firstLine) as { reqPerSec: number; p50ms: number; p99ms: number };
    await new Promise((resolve) => (proc.exitCode !== null ? resolve(undefined) : proc.once('exit', resolve)));
    rounds.push({ scenario: '', reqPerSec: r.reqPerSec, p50ms: Math.round(r.p50ms * 100) / 100, p99ms: Math.round(r.p99ms * 100) / 100, errors: 0, non2xx: 0 });
  }
  return median('raw LevelDB, 32 writers, synced put of a token-sized value', rounds);
}

const RATE = Number(process.env.BENCH_REPLICATION_RATE ?? 1000);
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

/**
 * Writes TOKENS tokens and FILTER_POLICIES policies straight into the store (as fast as
 * it goes); every policy is linked by 10 tokens, and `policyID` by 10 more.
 */
async function seed(dataDir: string, policyID: string): Promise<string[]> {
  const store = await LevelStore.open(join(dataDir, 'store'), { durability: 'os', changeLog: true });
  const now = new Date().toISOString();
  const policies = Array.from({ length: FILTER_POLICIES }, () => generateID());
  await store.transact((tx) => {
    policies.forEach((ID, i) => {
      const base = { Name: `filter-${i}`, Description: '', Rules: 'acl = "read"' };
      tx.putPolicy({ ID, ...base, Hash: policyHash(base), Namespace: 'default', Partition: 'default' });
    });
  });
  const batch = 2000;
  for (let done = 0; done < TOKENS; done += batch) {
    await store.transact((tx) => {
      for (let i = done; i < Math.min(done + batch, TOKENS); i++) {
        const links = [];
        if (i % Math.floor(TOKENS / 10) === 0) links.push({ ID: policyID });
        if (i % 10 === 1 && Math.floor(i / 10) < FILTER_POLICIES * 10) links.push({ ID: policies[Math.floor(i / 10) % FILTER_POLICIES] as string });
        const base = {
          Description: `seeded ${i}`,
          Policies: links,
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
  return policies;
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
    const filterPolicies = await seed(dataDir, policy.ID);
    process.stdout.write(`seeded ${TOKENS} tokens in ${((Date.now() - seedStart) / 1000).toFixed(1)} s\n`);
    // BENCH_ONLY=tls: the HTTPS read against the plain read on copies of the seeded store, alone.
    if (process.env.BENCH_ONLY === 'tls') {
      const report = await runTlsBench(dataDir);
      if (report.ratio < 0.8) process.exitCode = 1;
      return;
    }
    // BENCH_ONLY=authorize: decisions over HTTP against the bare route, alone.
    if (process.env.BENCH_ONLY === 'authorize') {
      if (!authorizeOK(await runAuthorizeBench(dataDir))) process.exitCode = 1;
      return;
    }

    // The baselines first, while nothing else runs (a freshly started daemon is still settling).
    const baseline = startProcess(['scripts/bench-baseline.ts']);
    procs.push(baseline.proc);
    const baselinePort = await baseline.firstLine;
    const bare = await load('bare Fastify route, constant token JSON', { url: `http://127.0.0.1:${baselinePort}/baseline` });
    await stop(baseline.proc);
    const raw = await levelBaseline();

    daemon = await startDaemon(dataDir);
    procs.push(daemon.proc);
    const self = (await (await fetch(`${daemon.url}/v1/acl/token/self`, { headers })).json()) as { AccessorID: string };
    const check = (await (await fetch(`${daemon.url}/v1/acl/tokens?policy=${filterPolicies[7]}`, { headers })).json()) as unknown[];
    if (check.length !== 10) throw new Error(`expected 10 tokens for the policy filter, got ${check.length}`);
    // Warm up: compiled code, and the store's background compaction after the seeding.
    await autocannon({ connections: CONNECTIONS, duration: 3, url: `${daemon.url}/v1/acl/token/${self.AccessorID}`, headers });
    let next = 0;
    const rows: Array<Row & { ratio?: string; target: string; ok: boolean }> = [];
    const ratio = (row: Row, base: Row) => row.reqPerSec / base.reqPerSec;
    const add = (row: Row, target: string, ok: boolean, base?: Row) => rows.push({ ...row, ...(base ? { ratio: `${ratio(row, base).toFixed(2)}x` } : {}), target, ok: ok && row.errors === 0 && row.non2xx === 0 });
    rows.push({ ...bare, ratio: '1.00x', target: 'baseline', ok: true }, { ...raw, ratio: '1.00x', target: 'baseline', ok: true });

    // BENCH_ONLY=replication skips the HTTP scenarios (for work on replication).
    if (process.env.BENCH_ONLY !== 'replication') {
      const read = await load('token read by accessor (management token)', { url: `${daemon.url}/v1/acl/token/${self.AccessorID}`, headers });
      add(read, '>= 0.5x bare', ratio(read, bare) >= 0.5, bare);
      const selfRead = await load('token self', { url: `${daemon.url}/v1/acl/token/self`, headers });
      add(selfRead, '>= 0.5x bare', ratio(selfRead, bare) >= 0.5, bare);
      const expanded = await load('token read ?expanded', { url: `${daemon.url}/v1/acl/token/${self.AccessorID}?expanded`, headers });
      add(expanded, '>= 0.3x bare', ratio(expanded, bare) >= 0.3, bare);
      const filter = await load(`tokens?policy=X, 10 of ${TOKENS}, a different X per request`, {
        url: daemon.url,
        headers,
        requests: [{ method: 'GET', setupRequest: (req) => ({ ...req, path: `/v1/acl/tokens?policy=${filterPolicies[next++ % filterPolicies.length]}` }) }],
      });
      add(filter, 'p99 <= 5 ms', filter.p99ms <= 5);
      const create = await load('token create (fsync, group commit)', { url: `${daemon.url}/v1/acl/token`, method: 'PUT', headers, body: '{"Description":"bench"}' });
      add(create, '>= 0.6x raw LevelDB, p99 <= 20 ms', ratio(create, raw) >= 0.6 && create.p99ms <= 20, raw);
      const readReq = { method: 'GET' as const, path: `/v1/acl/token/${self.AccessorID}` };
      const mix = await load('90% token reads / 10% creates', {
        url: daemon.url,
        headers,
        requests: [...Array.from({ length: 9 }, () => readReq), { method: 'PUT', path: '/v1/acl/token', body: '{"Description":"mix"}' }],
      });
      add(mix, `reads ${Math.round(mix.reqPerSec * 0.9)}/s, creates ${Math.round(mix.reqPerSec * 0.1)}/s`, true);
    }
    console.table(rows.map(({ errors: _e, non2xx: _n, ...r }) => r));
    // The daemon under test stays idle (replication uses it next) while the TLS pair runs.
    const tls = process.env.BENCH_ONLY === 'replication' ? undefined : await runTlsBench(dataDir, daemon.proc);
    if (tls && tls.ratio < 0.8) rows.push({ scenario: 'token read over HTTPS (keep-alive)', reqPerSec: tls.tls.reqPerSec, p50ms: 0, p99ms: tls.tls.p99ms, errors: 0, non2xx: 0, ratio: `${tls.ratio.toFixed(2)}x plain`, target: '>= 0.8x plain HTTP', ok: false });
    let authorize: AuthorizeBench | undefined;
    if (process.env.BENCH_ONLY !== 'replication') {
      await stop(daemon.proc);
      authorize = await runAuthorizeBench(dataDir);
      if (!authorizeOK(authorize)) rows.push({ scenario: 'authorize, 1 / 16 checks', reqPerSec: authorize.one.reqPerSec, p50ms: 0, p99ms: authorize.one.p99ms, errors: 0, non2xx: 0, target: '>= 0.5x / >= 0.3x bare, enforcing client 1M calls < 1 s', ok: false });
      daemon = await startDaemon(dataDir);
      procs.push(daemon.proc);
    }
    const replication = await replicationBench(daemon.url);
    const replicationChecks = [
      { measure: `fresh secondary catches up on ${TOKENS} tokens`, value: `${(replication.catchUpMs! / 1000).toFixed(2)} s`, target: '< 10 s', ok: replication.catchUpMs! < 10_000 },
      { measure: `replication lag at ${RATE} global writes/s, p50`, value: `${replication.lagP50ms!.toFixed(1)} ms`, target: '', ok: true },
      { measure: `replication lag at ${RATE} global writes/s, p99`, value: `${replication.lagP99ms!.toFixed(1)} ms`, target: '< 50 ms', ok: replication.lagP99ms! < 50 },
      { measure: 'share of writes applied within 100 ms', value: `${(replication.within100msShare! * 100).toFixed(2)} %`, target: '', ok: true },
      { measure: 'writes / applied on the secondary / achieved rate', value: `${replication.writes} / ${replication.applied} / ${replication.achievedRate!.toFixed(0)} per s`, target: '', ok: replication.applied === replication.writes },
    ];
    console.table(replicationChecks);
    // The seeded daemon is done with: the three servers get the machine to themselves.
    for (const p of procs) await stop(p);
    const servers = await runServersBench();
    if (rows.some((r) => !r.ok) || replicationChecks.some((c) => !c.ok)) process.exitCode = 1;
    const outDir = join(ROOT, 'bench-results');
    await mkdir(outDir, { recursive: true });
    const file = join(outDir, `bench-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    const report = { date: new Date().toISOString(), node: process.version, durationSeconds: DURATION, rounds: ROUNDS, connections: CONNECTIONS, tokens: TOKENS, rows, tls, authorize, replication, servers };
    await writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
    process.stdout.write(`wrote ${file}\n`);
  } finally {
    for (const p of procs) await stop(p);
    await rm(dataDir, { recursive: true, force: true });
  }
}

const authorizeOK = (r: AuthorizeBench): boolean => r.one.reqPerSec / r.bare.reqPerSec >= 0.5 && r.sixteen.reqPerSec / r.bare.reqPerSec >= 0.3 && r.enforcing.medianMs < 1000;

/** Decisions over HTTP, 1 and 16 checks, against the bare route (SPEC §11, §17), on the seeded store. */
async function runAuthorizeBench(dataDir: string): Promise<AuthorizeBench> {
  const r = await authorizeBench(dataDir, SECRET, { seconds: DURATION, rounds: ROUNDS, connections: CONNECTIONS });
  process.stdout.write(`decisions: median of ${r.rounds} alternating rounds; ${r.pinned ? 'servers on CPU 1, load generator on CPU 0' : 'not pinned (taskset or a second CPU missing)'}\n`);
  console.table([
    { scenario: 'bare Fastify route', 'req/s': r.bare.reqPerSec, 'p99 ms': r.bare.p99ms, ratio: '1.00x', target: 'baseline' },
    { scenario: 'authorize, 1 check', 'req/s': r.one.reqPerSec, 'p99 ms': r.one.p99ms, ratio: `${(r.one.reqPerSec / r.bare.reqPerSec).toFixed(2)}x`, target: '>= 0.5x bare', ok: r.one.reqPerSec / r.bare.reqPerSec >= 0.5 },
    { scenario: 'authorize, 16 checks', 'req/s': r.sixteen.reqPerSec, 'p99 ms': r.sixteen.p99ms, ratio: `${(r.sixteen.reqPerSec / r.bare.reqPerSec).toFixed(2)}x`, target: '>= 0.3x bare', ok: r.sixteen.reqPerSec / r.bare.reqPerSec >= 0.3 },
    { scenario: 'enforcing client, 1,000,000 allowed() in-process', 'req/s': Math.round(r.enforcing.calls / (r.enforcing.medianMs / 1000)), 'p99 ms': 0, ratio: `${r.enforcing.medianMs} ms`, target: '< 1000 ms', ok: r.enforcing.medianMs < 1000 },
  ]);
  return r;
}

/** Token reads over one server of three, then all three (SPEC §13), with each server's CPU per read. */
/**
 * Token read over HTTPS against plain HTTP (SPEC §11, §16), each on its own copy of the
 * seeded data dir. `running`, the daemon already on `dataDir`, is paused meanwhile (a copy
 * of a store held open is not taken while it writes).
 */
async function runTlsBench(dataDir: string, running?: ChildProcess): Promise<TlsBench> {
  const plainDir = await mkdtemp(join(tmpdir(), 'watchword-bench-plain-'));
  const tlsDir = await mkdtemp(join(tmpdir(), 'watchword-bench-https-'));
  try {
    running?.kill('SIGSTOP');
    try {
      await cp(dataDir, plainDir, { recursive: true, filter: (src) => !src.endsWith('LOCK') && !src.endsWith('http-addr') });
      await cp(dataDir, tlsDir, { recursive: true, filter: (src) => !src.endsWith('LOCK') && !src.endsWith('http-addr') });
    } finally {
      running?.kill('SIGCONT');
    }
    const r = await tlsBench(plainDir, tlsDir, SECRET, { seconds: DURATION, rounds: ROUNDS, connections: CONNECTIONS });
    console.table([
      { scenario: 'token read, plain HTTP (keep-alive)', 'req/s': r.plain.reqPerSec, 'p99 ms': r.plain.p99ms, ratio: '1.00x', target: 'baseline' },
      { scenario: 'token read, HTTPS (keep-alive)', 'req/s': r.tls.reqPerSec, 'p99 ms': r.tls.p99ms, ratio: `${r.ratio.toFixed(2)}x`, target: '>= 0.8x plain', ok: r.ratio >= 0.8 },
    ]);
    process.stdout.write(`TLS pair: median of ${r.rounds} alternating rounds; ${r.pinned ? 'daemons on CPU 1, load generator on CPU 0' : 'not pinned (taskset or a second CPU missing)'}\n`);
    return r;
  } finally {
    await rm(plainDir, { recursive: true, force: true });
    await rm(tlsDir, { recursive: true, force: true });
  }
}

async function runServersBench(): Promise<ServersBench> {
  const result = await serversBench({ connections: CONNECTIONS, duration: DURATION });
  if (result.skipped) {
    process.stdout.write(`read scale-out over 3 servers: skipped, ${result.skipped}\n`);
    return result;
  }
  const { single, follower, spread } = result as Required<Omit<ServersBench, 'skipped'>>;
  console.table(
    [single, follower, spread].flatMap((row) => [
      { scenario: row.scenario, 'req/s': row.reqPerSec, 'p99 ms': row.p99ms, ratio: `${(row.reqPerSec / single.reqPerSec).toFixed(2)}x`, errors: row.errors },
      ...row.perServer.map((p) => ({ scenario: `  ${p.server}`, 'req/s': p.readsPerSec, 'CPU µs per read': p.cpuMicrosPerRead })),
    ]),
  );
  if (single.errors + follower.errors + spread.errors > 0) process.exitCode = 1;
  return result;
}

if (process.env.BENCH_ONLY === 'servers') await runServersBench();
else await main();
