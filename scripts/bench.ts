/**
 * npm run bench: the performance contract (docs/development.md, "Development"). Seeds BENCH_TOKENS tokens (default
 * 100,000) into a temp data dir and measures, against baselines taken in the same run, with
 * the servers under test on CPU 1 and the load generator (autocannon, BENCH_CONNECTIONS
 * connections, default 32) on CPU 0: the reads, the policy filter and the durable writes
 * (create, delete, a jwt login) (scripts/bench-http.ts: bare node:http and Fastify routes
 * returning a constant token-sized JSON object, raw LevelDB with 32 concurrent synced puts), HTTPS against plain HTTP, decisions; then
 * replication (a fresh secondary's catch-up, the lag at BENCH_REPLICATION_RATE global
 * writes/s for BENCH_REPLICATION_SECONDS, default 20) and reads over three servers. Each pinned figure is the median of BENCH_ROUNDS
 * rounds (default and at least 3) of BENCH_DURATION seconds (default 6). The daemon runs
 * built (dist/, as `npm start` runs it). Prints every floor beside its figure, writes the
 * figures as JSON to bench-results/, and exits non-zero when a floor is missed.
 * BENCH_ONLY=http|tls|authorize|audit|replication|servers runs one part; BENCH_ONLY=ab BENCH_AB=<commit> compares
 * the hot paths with another commit's build, interleaved (scripts/bench-ab.ts).
 */
import type { ChildProcess } from 'node:child_process';
import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ServersBench, serversBench } from './bench-servers.js';
import { type TlsBench, tlsBench } from './bench-tls.js';
import { type AuthorizeBench, authorizeBench } from './bench-authorize.js';
import { AUDIT_MODES, type AuditBench, type AuditMode, auditBench, auditFloors } from './bench-audit.js';
import { type FloorRow, type HttpBench, httpBench, httpFloors } from './bench-http.js';
import { abBench, abTable } from './bench-ab.js';
import { startDaemonProcess, stopDaemonProcess, useBuiltDaemon } from './daemon-process.js';
import { histogram, quantile } from './bench-metrics.js';
import { policyHash, tokenHash } from '../src/domain/hash.js';
import { generateID } from '../src/domain/ids.js';
import { LevelStore } from '../src/store/level-store.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DURATION = Number(process.env.BENCH_DURATION ?? 6);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const ROUNDS = Math.max(3, Number(process.env.BENCH_ROUNDS ?? 3));
const TOKENS = Number(process.env.BENCH_TOKENS ?? 100_000);
/** Policies in the filter scenario; each is linked by 10 tokens. */
const FILTER_POLICIES = Math.min(1000, Math.floor(TOKENS / 100));
const SECRET = 'bench-management-secret';
useBuiltDaemon();

// The load generator is one client with many connections: the per-client connection cap (200) is not what is measured.
const startDaemon = (dataDir: string, extra: string[] = ['--initial-management-token', SECRET]) =>
  startDaemonProcess(dataDir, [...extra, '--http-max-conns-per-client', '0'], process.env.BENCH_DAEMON_LOGS);
const stop = stopDaemonProcess;

const RATE = Number(process.env.BENCH_REPLICATION_RATE ?? 1000);
/**
 * 20 s: 20,000 writes, so that one stall of either daemon (a scavenge, a busy disk) is not the
 * p99 by itself, as it was over 5 s (5,000 writes: 15.8-43.8 ms; over 20 s: 7.7-17.6 ms).
 */
const LAG_SECONDS = Number(process.env.BENCH_REPLICATION_SECONDS ?? 20);


async function replicationStatus(url: string): Promise<{ ReplicatedIndex: number; Connected: boolean }> {
  return (await (await fetch(`${url}/v1/acl/replication`)).json()) as { ReplicatedIndex: number; Connected: boolean };
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
  // What the primary holds now (the HTTP scenarios before deleted some seeded tokens and made others).
  const self = (await (await fetch(`${primaryURL}/v1/agent/self`, { headers: { 'X-Service-Token': SECRET } })).json()) as { Stats: { Tokens: number } };
  const tokens = self.Stats.Tokens;
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
    const before = await histogram(dc2.url, metric, SECRET);
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
    const after = await histogram(dc2.url, metric, SECRET);
    const delta = after.map(([le, n], i) => [le, n - (before[i]?.[1] ?? 0)] as [number, number]);
    const count = delta[delta.length - 1]?.[1] ?? 0;
    const within100 = delta.find(([le]) => le === 0.1)?.[1] ?? 0;
    return {
      catchUpMs,
      tokens,
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
 * it goes); every policy is linked by 10 tokens, and `policyID` by 10 more. Returns the
 * policies, and the tokens linked to none of them (the delete scenario's).
 */
async function seed(dataDir: string, policyID: string): Promise<{ policies: string[]; deletable: string[] }> {
  const store = await LevelStore.open(join(dataDir, 'store'), { durability: 'os', changeLog: true });
  const now = new Date().toISOString();
  const policies = Array.from({ length: FILTER_POLICIES }, () => generateID());
  await store.transact((tx) => {
    policies.forEach((ID, i) => {
      const base = { Name: `filter-${i}`, Description: '', Rules: 'acl = "read"' };
      tx.put('policies', { ID, ...base, Hash: policyHash(base), Namespace: 'default', Partition: 'default' });
    });
  });
  const batch = 2000;
  const deletable: string[] = [];
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
        const AccessorID = generateID();
        if (links.length === 0) deletable.push(AccessorID);
        tx.put('tokens', { AccessorID, SecretID: generateID(), ...base, AuthMethod: '', CreateTime: now, Hash: tokenHash(base), Namespace: 'default', Partition: 'default' });
      }
    });
  }
  await store.close();
  return { policies, deletable };
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
    const { policies: filterPolicies, deletable } = await seed(dataDir, policy.ID);
    process.stdout.write(`seeded ${TOKENS} tokens in ${((Date.now() - seedStart) / 1000).toFixed(1)} s\n`);
    const only = process.env.BENCH_ONLY;
    // BENCH_ONLY=tls: the HTTPS read against the plain read on copies of the seeded store, alone.
    if (only === 'tls') {
      const report = await runTlsBench(dataDir);
      if (report.ratio < 0.8) process.exitCode = 1;
      return;
    }
    // BENCH_ONLY=authorize: decisions over HTTP against the bare route, alone.
    if (only === 'authorize') {
      if (!authorizeOK(await runAuthorizeBench(dataDir))) process.exitCode = 1;
      return;
    }

    // BENCH_ONLY=audit: token create and read with the audit log off, best-effort and enforced, alone.
    if (only === 'audit') {
      const audit = await runAuditBench(dataDir);
      if (!auditOK(audit)) process.exitCode = 1;
      await writeReport({ audit });
      return;
    }

    // BENCH_ONLY=ab BENCH_AB=<commit>: the hot paths of this build against that commit's, interleaved, alone.
    if (only === 'ab') {
      const rev = process.env.BENCH_AB;
      if (!rev) throw new Error('BENCH_ONLY=ab needs BENCH_AB=<commit> (the build to compare with)');
      const scenarios = process.env.BENCH_SCENARIOS ? new Set(process.env.BENCH_SCENARIOS.split(',')) : undefined;
      const ab = await abBench(dataDir, SECRET, rev, { seconds: DURATION, rounds: ROUNDS, connections: CONNECTIONS, filterPolicies, ...(scenarios ? { only: scenarios } : {}) });
      process.stdout.write(`A/B against ${ab.commit.slice(0, 12)}: median of ${ab.rounds} interleaved rounds of ${DURATION} s; ${ab.pinned ? 'servers on CPU 1, load generator on CPU 0' : 'not pinned'}\n`);
      console.table(abTable(ab));
      if (ab.rows.some((r) => !r.ok)) process.exitCode = 1;
      await writeReport({ ab });
      return;
    }

    // 2. The HTTP floors, pinned, every scenario in each round (BENCH_SCENARIOS=read,self,… for a few).
    let http: HttpBench | undefined;
    let rows: FloorRow[] = [];
    if (only === undefined || only === 'http') {
      const scenarios = process.env.BENCH_SCENARIOS ? new Set(process.env.BENCH_SCENARIOS.split(',')) : undefined;
      http = await httpBench(dataDir, SECRET, { seconds: DURATION, rounds: ROUNDS, connections: CONNECTIONS, filterPolicies, deletable, ...(scenarios ? { only: scenarios } : {}) });
      process.stdout.write(`HTTP: median of ${http.rounds} rounds of ${DURATION} s, each running every scenario; ${http.pinned ? 'servers on CPU 1, load generator on CPU 0' : 'not pinned (taskset or a second CPU missing)'}\n`);
      rows = httpFloors(http, TOKENS);
      console.table(rows);
      if (only === 'http') {
        if (rows.some((r) => r.ok === false)) process.exitCode = 1;
        await writeReport({ http, rows });
        return;
      }
    }

    // 3. HTTPS against plain HTTP, then decisions, each on their own daemons.
    const tls = only === 'replication' ? undefined : await runTlsBench(dataDir);
    const authorize = only === 'replication' ? undefined : await runAuthorizeBench(dataDir);
    const audit = only === 'replication' ? undefined : await runAuditBench(dataDir);

    // 4. Replication to a fresh secondary, then reads over three servers.
    daemon = await startDaemon(dataDir);
    procs.push(daemon.proc);
    const replication = await replicationBench(daemon.url);
    const replicationChecks = [
      { measure: `fresh secondary catches up on ${replication.tokens} tokens`, value: `${(replication.catchUpMs! / 1000).toFixed(2)} s`, target: '< 10 s', ok: replication.catchUpMs! < 10_000 },
      { measure: `replication lag at ${RATE} global writes/s, p50`, value: `${replication.lagP50ms!.toFixed(1)} ms`, target: '', ok: true },
      { measure: `replication lag at ${RATE} global writes/s, p99`, value: `${replication.lagP99ms!.toFixed(1)} ms`, target: '< 20 ms', ok: replication.lagP99ms! < 20 },
      { measure: 'share of writes applied within 100 ms', value: `${(replication.within100msShare! * 100).toFixed(2)} %`, target: '', ok: true },
      { measure: 'writes / applied on the secondary / achieved rate', value: `${replication.writes} / ${replication.applied} / ${replication.achievedRate!.toFixed(0)} per s`, target: '', ok: replication.applied === replication.writes },
    ];
    console.table(replicationChecks);
    // The seeded daemon is done with: the three servers get the machine to themselves.
    for (const p of procs) await stop(p);
    const servers = await runServersBench();
    const failed = rows.some((r) => r.ok === false) || replicationChecks.some((c) => !c.ok) || (tls !== undefined && tls.ratio < 0.8) || (authorize !== undefined && !authorizeOK(authorize)) || (audit !== undefined && !auditOK(audit));
    if (failed) process.exitCode = 1;
    await writeReport({ http, rows, tls, authorize, audit, replication, servers });
  } finally {
    for (const p of procs) await stop(p);
    await rm(dataDir, { recursive: true, force: true });
  }
}

/** The figures as JSON in bench-results/. */
async function writeReport(figures: Record<string, unknown>): Promise<void> {
  const outDir = join(ROOT, 'bench-results');
  await mkdir(outDir, { recursive: true });
  const file = join(outDir, `bench-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  const report = { date: new Date().toISOString(), node: process.version, durationSeconds: DURATION, rounds: ROUNDS, connections: CONNECTIONS, tokens: TOKENS, ...figures };
  await writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
  process.stdout.write(`wrote ${file}\n`);
}

const authorizeOK = (r: AuthorizeBench): boolean => r.one.reqPerSec / r.bare.reqPerSec >= 0.5 && r.sixteen.reqPerSec / r.bare.reqPerSec >= 0.3 && r.enforcing.medianMs < 1000;

/** Decisions over HTTP, 1 and 16 checks, against the bare route (docs/development.md, "Development" and "Enforcing policies in your service"), on the seeded store. */
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

const auditOK = (r: AuditBench): boolean => auditFloors(r).every((row) => row.ok !== false);

/** Token create and read with the audit log off, best-effort and enforced (docs/audit.md, "Audit log"), each on its own copy of the seeded data dir. */
async function runAuditBench(dataDir: string): Promise<AuditBench> {
  const dirs = {} as Record<AuditMode, string>;
  try {
    for (const mode of AUDIT_MODES) {
      dirs[mode] = await mkdtemp(join(tmpdir(), `watchword-bench-audit-${mode}-`));
      await cp(dataDir, dirs[mode], { recursive: true, filter: (src) => !src.endsWith('LOCK') && !src.endsWith('http-addr') });
    }
    const r = await auditBench(dirs, SECRET, { seconds: DURATION, rounds: ROUNDS, connections: CONNECTIONS });
    process.stdout.write(`audit log: median of ${r.rounds} rounds (figure: the median of each round's ratio to off), the order turned round every other round; ${r.pinned ? 'daemons on CPU 1, load generator on CPU 0' : 'not pinned (taskset or a second CPU missing)'}\n`);
    console.table(auditFloors(r));
    return r;
  } finally {
    for (const dir of Object.values(dirs)) await rm(dir, { recursive: true, force: true });
  }
}

/** Token read over HTTPS against plain HTTP (docs/development.md, "Development" and "TLS"), each on its own copy of the seeded data dir. */
async function runTlsBench(dataDir: string): Promise<TlsBench> {
  const plainDir = await mkdtemp(join(tmpdir(), 'watchword-bench-plain-'));
  const tlsDir = await mkdtemp(join(tmpdir(), 'watchword-bench-https-'));
  try {
    await cp(dataDir, plainDir, { recursive: true, filter: (src) => !src.endsWith('LOCK') && !src.endsWith('http-addr') });
    await cp(dataDir, tlsDir, { recursive: true, filter: (src) => !src.endsWith('LOCK') && !src.endsWith('http-addr') });
    const r = await tlsBench(plainDir, tlsDir, SECRET, { seconds: DURATION, rounds: ROUNDS, connections: CONNECTIONS });
    console.table([
      { scenario: 'token read, plain HTTP (keep-alive)', 'req/s': r.plain.reqPerSec, 'p99 ms': r.plain.p99ms, 'server CPU µs/req': r.plain.cpuMicros, ratio: '1.00x', target: 'baseline' },
      { scenario: 'token read, HTTPS (keep-alive)', 'req/s': r.tls.reqPerSec, 'p99 ms': r.tls.p99ms, 'server CPU µs/req': r.tls.cpuMicros, ratio: `${r.ratio.toFixed(2)}x`, target: '>= 0.8x plain', ok: r.ratio >= 0.8 },
    ]);
    process.stdout.write(`TLS pair: median of ${r.rounds} alternating rounds; ${r.pinned ? 'daemons on CPU 1, load generator on CPU 0' : 'not pinned (taskset or a second CPU missing)'}\n`);
    return r;
  } finally {
    await rm(plainDir, { recursive: true, force: true });
    await rm(tlsDir, { recursive: true, force: true });
  }
}

/** Token reads over one server of three, then all three (docs/servers.md, "Several servers per datacenter"), with each server's CPU per read. */
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
