/**
 * npm run bench: starts a daemon on a temp data dir, loads it with autocannon and prints
 * req/s, p50 and p99 for the hot paths, beside a bare Fastify route for comparison.
 * Writes the figures as JSON to bench-results/. Bounded: every scenario runs for
 * BENCH_DURATION seconds (default 10) with BENCH_CONNECTIONS connections (default 50).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { tokenHash } from '../src/domain/hash.js';
import { generateID } from '../src/domain/ids.js';
import type { TokenRecord } from '../src/domain/types.js';
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

async function startDaemon(dataDir: string): Promise<{ proc: ChildProcess; url: string }> {
  await rm(join(dataDir, 'http-addr'), { force: true });
  const proc = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/main.ts', 'agent', '--data-dir', dataDir, '--http-addr', '127.0.0.1:0', '--log-level', 'error', '--initial-management-token', SECRET],
    { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] },
  );
  for (let i = 0; i < 400; i++) {
    try {
      const addr = (await readFile(join(dataDir, 'http-addr'), 'utf8')).trim();
      if (addr) return { proc, url: `http://${addr}` };
    } catch {
      // not yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('daemon did not start');
}

async function stop(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null) return;
  const exited = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGTERM');
  await exited;
}

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

/** Writes TOKENS tokens straight into the store; 10 of them link `policyID`. */
async function seed(dataDir: string, policyID: string): Promise<void> {
  const store = await LevelStore.open(join(dataDir, 'store'), { durability: 'os', changeLog: true });
  const now = new Date().toISOString();
  const batch = 2000;
  for (let done = 0; done < TOKENS; done += batch) {
    await store.transact(async (tx) => {
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
        const t: TokenRecord = {
          AccessorID: generateID(),
          SecretID: generateID(),
          ...base,
          AuthMethod: '',
          CreateTime: now,
          Hash: tokenHash(base),
          Namespace: 'default',
          Partition: 'default',
          CreateIndex: tx.index,
          ModifyIndex: tx.index,
        };
        await tx.putToken(t);
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
    const outDir = join(ROOT, 'bench-results');
    await mkdir(outDir, { recursive: true });
    const file = join(outDir, `bench-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    const report = { date: new Date().toISOString(), node: process.version, durationSeconds: DURATION, connections: CONNECTIONS, tokens: TOKENS, rows };
    await writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
    process.stdout.write(`wrote ${file}\n`);
  } finally {
    for (const p of procs) await stop(p);
    await rm(dataDir, { recursive: true, force: true });
  }
}

await main();
