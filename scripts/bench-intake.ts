/**
 * npm run bench:intake: a whole state taken in, at BENCH_SCALE_TOKENS (default 1,000,000) seeded
 * tokens, each daemon as built with node's default heap (docs/datacenters.md, "Multiple datacenters"):
 *  1. a new HA follower joining a leader that holds them (a datacenter of two servers and
 *     etcd; skipped without etcd): the time from its start until it holds the leader's index,
 *     and its peak RSS (VmHWM) against the leader's RSS;
 *  2. a restore of a snapshot of them into a fresh daemon: the time of the PUT, and the
 *     restoring daemon's peak RSS against the RSS of the daemon that saved it.
 * Prints the figures, writes them to bench-results/. No floors: the bound the design keeps is a
 * peak near the state itself (a secondary's catch-up, with its floors, is in bench:scale).
 */
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { etcdBinary, startCluster } from '../src/testing/index.js';
import { memoryOf, rssBytes, seedTo } from './bench-seed.js';
import { startDaemonProcess, stopDaemonProcess, useBuiltDaemon } from './daemon-process.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TOKENS = Number(process.env.BENCH_SCALE_TOKENS ?? 1_000_000);
const SECRET = 'bench-intake-management-secret';
useBuiltDaemon();

const indexOf = async (url: string): Promise<number> => ((await (await fetch(`${url}/v1/internal/index`)).json()) as { Index: number }).Index;

interface Intake {
  ms: number;
  peakRss: number;
  rssAfter: number;
}

async function follower(seeded: string): Promise<(Intake & { leaderRss: number }) | undefined> {
  if (!etcdBinary()) {
    process.stdout.write('HA follower: skipped (etcd is not installed)\n');
    return undefined;
  }
  const cluster = await startCluster({ datacenters: { dc1: { servers: 2 } }, managementToken: SECRET, startTimeoutMs: 300_000 });
  try {
    // The leader keeps leading after a restart (a server outside the synchronous set may not take over):
    // it gets the seeded store, the other one an empty data dir.
    const leader = await cluster.primary.leader(60_000);
    const joiner = cluster.primary.servers.find((s) => s !== leader) as typeof leader;
    await joiner.stop();
    await leader.stop();
    await rm(join(leader.dataDir, 'store'), { recursive: true, force: true });
    await cp(seeded, join(leader.dataDir, 'store'), { recursive: true, filter: (src) => !src.endsWith('LOCK') });
    await rm(join(joiner.dataDir, 'store'), { recursive: true, force: true });
    await leader.start();
    await cluster.primary.leader(300_000);
    const target = await indexOf(leader.url);
    const leaderRss = await rssBytes(leader.pid as number);
    const started = performance.now();
    await joiner.start();
    for (;;) {
      if ((await indexOf(joiner.url).catch(() => 0)) >= target) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const ms = performance.now() - started;
    const mem = await memoryOf(joiner.pid as number);
    return { ms, leaderRss, peakRss: mem.peak, rssAfter: mem.now };
  } finally {
    await cluster.stop();
  }
}

async function restore(seeded: string): Promise<Intake & { bytes: number; sourceRss: number }> {
  const source = await mkdtemp(join(tmpdir(), 'watchword-intake-source-'));
  const target = await mkdtemp(join(tmpdir(), 'watchword-intake-target-'));
  const file = join(target, '..', `${target.split('/').pop()}.snap`);
  try {
    await cp(seeded, join(source, 'store'), { recursive: true, filter: (src) => !src.endsWith('LOCK') });
    const a = await startDaemonProcess(source, ['--initial-management-token', SECRET], undefined, undefined, 300_000);
    const sourceRss = await rssBytes(a.proc.pid as number);
    const saved = await fetch(`${a.url}/v1/snapshot`, { headers: { 'X-Service-Token': SECRET } });
    await writeFile(file, Buffer.from(await saved.arrayBuffer()));
    await stopDaemonProcess(a.proc);
    const b = await startDaemonProcess(target, ['--initial-management-token', SECRET, '--snapshot-max-bytes', String(16 * 1024 ** 3)]);
    try {
      const body = await readFile(file);
      const started = performance.now();
      const res = await fetch(`${b.url}/v1/snapshot`, { method: 'PUT', headers: { 'X-Service-Token': SECRET }, body });
      if (res.status !== 200) throw new Error(`the restore answered ${res.status}: ${await res.text()}`);
      const ms = performance.now() - started;
      const mem = await memoryOf(b.proc.pid as number);
      return { ms, bytes: body.length, sourceRss, peakRss: mem.peak, rssAfter: mem.now };
    } finally {
      await stopDaemonProcess(b.proc);
    }
  } finally {
    await rm(source, { recursive: true, force: true });
    await rm(target, { recursive: true, force: true });
    await rm(file, { force: true });
  }
}

const MB = (b: number) => `${Math.round(b / 1048576)} MB`;

async function main(): Promise<void> {
  const seeded = await mkdtemp(join(tmpdir(), 'watchword-intake-seed-'));
  try {
    const t = performance.now();
    await seedTo(join(seeded, 'store'), 0, TOKENS);
    process.stdout.write(`seeded ${TOKENS} tokens in ${((performance.now() - t) / 1000).toFixed(1)} s\n`);
    const f = await follower(join(seeded, 'store'));
    if (f)
      process.stdout.write(
        `HA follower joining a leader of ${TOKENS} tokens: ${(f.ms / 1000).toFixed(1)} s; peak RSS ${MB(f.peakRss)} (${MB(f.rssAfter)} after) against the leader's ${MB(f.leaderRss)}: ${(f.peakRss / f.leaderRss).toFixed(2)}x\n`,
      );
    const r = await restore(join(seeded, 'store'));
    process.stdout.write(
      `restore of a ${MB(r.bytes)} snapshot of ${TOKENS} tokens: ${(r.ms / 1000).toFixed(1)} s; peak RSS ${MB(r.peakRss)} (${MB(r.rssAfter)} after) against the saving daemon's ${MB(r.sourceRss)}: ${(r.peakRss / r.sourceRss).toFixed(2)}x\n`,
    );
    await mkdir(join(ROOT, 'bench-results'), { recursive: true });
    const out = join(ROOT, 'bench-results', `intake-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    await writeFile(out, `${JSON.stringify({ date: new Date().toISOString(), tokens: TOKENS, follower: f ?? null, restore: r }, null, 2)}\n`);
    process.stdout.write(`wrote ${out}\n`);
  } finally {
    await rm(seeded, { recursive: true, force: true });
  }
}

await main();
