/**
 * npm run bench:scale: the 1,000,000-token figures of SPEC §11. Seeds tokens straight
 * into the store (as fast as it goes), then starts the daemon as a child process and
 * measures the time from spawn to the first answered token read, its RSS per token, and
 * the token-read p99 under load (autocannon, 32 connections), first at 100,000 tokens
 * and then at BENCH_SCALE_TOKENS (default 1,000,000) in the same data dir.
 * Targets: start to first read <= 15 s; RSS <= 2 KB per token; read p99 at the large
 * size no worse than at 100,000 (within 1 ms, the resolution autocannon reports).
 * Writes the figures to bench-results/; exits non-zero when a target is missed.
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { tokenHash } from '../src/domain/hash.js';
import { generateID } from '../src/domain/ids.js';
import { LevelStore } from '../src/store/level-store.js';
import { stopDaemonProcess } from './daemon-process.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const LARGE = Number(process.env.BENCH_SCALE_TOKENS ?? 1_000_000);
const SMALL = Math.min(100_000, LARGE);
const DURATION = Number(process.env.BENCH_DURATION ?? 6);
const SECRET = 'bench-scale-management-secret';
const SETTLE_MS = Number(process.env.BENCH_SCALE_SETTLE_MS ?? 10_000);

/** Adds tokens to the store until it holds `total` seeded ones. */
async function seedTo(storeDir: string, from: number, total: number): Promise<void> {
  const store = await LevelStore.open(storeDir, { durability: 'os', changeLog: false });
  const now = new Date().toISOString();
  for (let done = from; done < total; done += 5000) {
    await store.transact((tx) => {
      for (let i = done; i < Math.min(done + 5000, total); i++) {
        const base = { Description: `seeded ${i}`, Policies: [], Roles: [], ServiceIdentities: [{ ServiceName: `svc-${i % 1000}` }], NodeIdentities: [], TemplatedPolicies: [], Local: false };
        tx.putToken({ AccessorID: generateID(), SecretID: generateID(), ...base, AuthMethod: '', CreateTime: now, Hash: tokenHash(base), Namespace: 'default', Partition: 'default' });
      }
    });
  }
  await store.close();
}

async function rssBytes(pid: number): Promise<number> {
  const kb = /VmRSS:\s+(\d+) kB/.exec(await readFile(`/proc/${pid}/status`, 'utf8'));
  return Number(kb?.[1] ?? 0) * 1024;
}

/** Starts the daemon and polls a token read until it answers; returns the time that took. */
async function startAndRead(dataDir: string, accessor: string | undefined) {
  await rm(join(dataDir, 'http-addr'), { force: true });
  const started = performance.now();
  const proc = spawn(process.execPath, [...(process.env.SCALE_NODE_FLAGS ? process.env.SCALE_NODE_FLAGS.split(' ') : []), 'dist/main.js', 'agent', '--data-dir', dataDir, '--http-addr', '127.0.0.1:0', '--log-level', 'error', '--initial-management-token', SECRET], { cwd: ROOT, env: { ...process.env, WATCHWORD_LIFELINE: 'stdin' }, stdio: ['pipe', 'ignore', 'inherit'] });
  let url = '';
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`daemon exited with ${proc.exitCode}`);
    if (performance.now() - started > 120_000) throw new Error('daemon did not answer within 120 s');
    try {
      url ||= `http://${(await readFile(join(dataDir, 'http-addr'), 'utf8')).trim()}`;
      const path = accessor ? `/v1/acl/token/${accessor}` : '/v1/acl/token/self';
      const res = await fetch(`${url}${path}`, { headers: { 'X-Service-Token': SECRET } });
      if (res.status === 200) {
        const body = (await res.json()) as { AccessorID: string };
        return { proc, url, firstReadMs: performance.now() - started, accessor: body.AccessorID };
      }
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function measure(tokens: number, dataDir: string, accessor: string | undefined) {
  const d = await startAndRead(dataDir, accessor);
  try {
    // Steady state: the heap the load built is marked once before the read latency is taken.
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const rss = await rssBytes(d.proc.pid as number);
    const url = `${d.url}/v1/acl/token/${d.accessor}`;
    await autocannon({ url, connections: 32, duration: 2, headers: { 'X-Service-Token': SECRET } });
    const r = await autocannon({ url, connections: 32, duration: DURATION, headers: { 'X-Service-Token': SECRET } });
    return { tokens, firstReadMs: d.firstReadMs, rssMB: rss / 1048576, bytesPerToken: rss / tokens, readReqPerSec: Math.round(r.requests.average), readP50ms: r.latency.p50, readP99ms: r.latency.p99, accessor: d.accessor };
  } finally {
    await stopDaemonProcess(d.proc);
  }
}

async function main(): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), 'watchword-scale-'));
  try {
    let t = performance.now();
    await seedTo(join(dataDir, 'store'), 0, SMALL);
    process.stdout.write(`seeded ${SMALL} tokens in ${((performance.now() - t) / 1000).toFixed(1)} s\n`);
    const small = await measure(SMALL, dataDir, undefined);
    t = performance.now();
    await seedTo(join(dataDir, 'store'), SMALL, LARGE);
    process.stdout.write(`seeded up to ${LARGE} tokens in ${((performance.now() - t) / 1000).toFixed(1)} s more\n`);
    const large = await measure(LARGE, dataDir, small.accessor);
    const rows = [small, large].map(({ accessor: _a, ...r }) => ({ ...r, firstReadMs: Math.round(r.firstReadMs), rssMB: Math.round(r.rssMB), bytesPerToken: Math.round(r.bytesPerToken) }));
    console.table(rows);
    const checks = [
      { what: `start to first answered read at ${LARGE} tokens <= 15 s`, value: `${(large.firstReadMs / 1000).toFixed(2)} s`, ok: large.firstReadMs <= 15_000 },
      { what: 'RSS <= 2 KB per token', value: `${Math.round(large.bytesPerToken)} B per token (${Math.round(large.rssMB)} MB)`, ok: large.bytesPerToken <= 2048 },
      { what: `read p99 at ${LARGE} no worse than at ${SMALL}`, value: `${large.readP99ms} ms vs ${small.readP99ms} ms`, ok: large.readP99ms <= small.readP99ms + 1 },
    ];
    console.table(checks);
    await mkdir(join(ROOT, 'bench-results'), { recursive: true });
    const file = join(ROOT, 'bench-results', `scale-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    await writeFile(file, `${JSON.stringify({ date: new Date().toISOString(), rows, checks }, null, 2)}\n`);
    process.stdout.write(`wrote ${file}\n`);
    if (checks.some((c) => !c.ok)) process.exitCode = 1;
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}

await main();
