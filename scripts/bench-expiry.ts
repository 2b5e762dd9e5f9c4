/**
 * `npm run bench:expiry [N]` (docs/development.md, "Development"): N tokens (default 1,000,000) expiring
 * within one minute, beside 100,000 that stay, on one server. The server runs on CPU 1, this
 * process and its reads on CPU 0 (where the machine can pin). It reports:
 * - token reads at rest and while the reaper deletes (rate and p99 of each 2 s window);
 * - how long after the last expiry every expired token is gone;
 * - the store's size on disk before the expiring tokens were made, with them, and after the reap;
 * - the server's RSS.
 * The store is of format 3 (the upgrade finalized, tokens stored positional) unless BENCH_EXPIRY_FORMAT=2.
 * With BENCH_EXPIRY_SECONDARY=1, a secondary (on CPU 0, beside the reads) follows the server from
 * before the first expiry, and the lag with which it applies the deletes is reported (p50, p99:
 * from durable on the primary to applied on it, as it measures itself).
 * It fails (exit 1) when a figure of README's contract is missed: all gone within 5 minutes of
 * the last expiry, reads ≥ 0.8× their rate at rest with p99 ≤ 2× (medians of the windows
 * during the reap), disk back within 1.5× of before.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { canPin, diskUsage, medianOf, pinSelf, unpinSelf } from './bench-process.js';
import { finalizeStore, memoryOf, seedTo } from './bench-seed.js';
import { histogram, quantile } from './bench-metrics.js';
import { startDaemonProcess, stopDaemonProcess } from './daemon-process.js';

const N = Number(process.argv[2] ?? 1_000_000);
const STAY = 100_000;
const WINDOW_S = 2;
const MANAGEMENT = '6b1f7d0e-1111-4222-8333-944444444444';

const WITH_SECONDARY = process.env.BENCH_EXPIRY_SECONDARY === '1';
/** The store's format: 3 (tokens stored positional, as a finalized cluster's: converted after seeding), or 2 (BENCH_EXPIRY_FORMAT=2). */
const FORMAT = process.env.BENCH_EXPIRY_FORMAT === '2' ? 2 : 3;

const LAG_METRIC = 'watchword_replication_apply_lag_seconds';

const du = diskUsage;
const mb = (b: number) => `${(b / 1024 / 1024).toFixed(0)} MB`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function tokensHeld(url: string): Promise<number> {
  const res = await fetch(`${url}/v1/agent/self`, { headers: { 'X-Consul-Token': MANAGEMENT } });
  return ((await res.json()) as { Stats: { Tokens: number } }).Stats.Tokens;
}

interface Window {
  at: number;
  rate: number;
  p99: number;
}

async function readWindow(url: string, ids: string[]): Promise<Window> {
  const at = Date.now();
  const r = await autocannon({
    url,
    connections: 32,
    duration: WINDOW_S,
    headers: { 'X-Consul-Token': MANAGEMENT },
    requests: [{ setupRequest: (req) => ({ ...req, path: `/v1/acl/token/${ids[Math.floor(Math.random() * ids.length)]}` }) }],
  });
  if (r.non2xx > 0) throw new Error(`${r.non2xx} reads did not answer 200`);
  return { at, rate: r.requests.average, p99: r.latency.p99 };
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'bench-expiry-'));
  const store = join(dir, 'store');
  const pinned = canPin();
  try {
    const stay: string[] = [];
    let t = performance.now();
    await seedTo(store, 0, STAY, { made: (id) => stay.push(id) });
    const before = du(store);
    // The expiries start once the server has started and read at rest for a while. Seeding runs at
    // 60 tokens a ms here, a first start (a scan) at 1 s per 60,000 tokens; 30 s of reads at rest follow.
    // Format 3's conversion after seeding rewrites every token once (about 8 µs a token).
    const startAllowance = 20_000 + N / 40 + (FORMAT === 3 ? N / 50 : 0) + (WITH_SECONDARY ? 30_000 + N / 25 : 0);
    const seedRate = 45; // tokens per ms, at the least, when seeding
    const firstExpiry = Date.now() + N / seedRate + startAllowance + 30_000;
    const lastExpiry = firstExpiry + 60_000;
    await seedTo(store, STAY, STAY + N, {
      expires: (i) => new Date(firstExpiry + ((i - STAY) * 60_000) / N).toISOString(),
    });
    if (FORMAT === 3) await finalizeStore(store, true);
    const withTokens = du(store);
    process.stdout.write(
      `seeded ${STAY} + ${N} tokens${FORMAT === 3 ? ' and stored them positional (format 3)' : ' (format 2)'} in ${((performance.now() - t) / 1000).toFixed(1)} s; disk ${mb(before)} → ${mb(withTokens)}\n`,
    );
    if (Date.now() > firstExpiry - 40_000) throw new Error('seeding took longer than allowed for: the expiries would start before the server');

    t = performance.now();
    const daemon = await startDaemonProcess(dir, ['--initial-management-token', MANAGEMENT], undefined, pinned ? '1' : undefined, 300_000);
    process.stdout.write(`started in ${((performance.now() - t) / 1000).toFixed(1)} s; reads on ${pinned ? 'CPU 0, the server on CPU 1' : 'any CPU (cannot pin)'}\n`);
    if (pinned) pinSelf('0');
    let secondary: Awaited<ReturnType<typeof startDaemonProcess>> | undefined;
    try {
      if (WITH_SECONDARY) {
        t = performance.now();
        const flags = ['--datacenter', 'dc2', '--primary-datacenter', 'dc1', '--primary-address', daemon.url, '--replication-token', MANAGEMENT];
        secondary = await startDaemonProcess(join(dir, 'dc2'), flags, undefined, pinned ? '0' : undefined, 120_000);
        const target = ((await (await fetch(`${daemon.url}/v1/internal/index`)).json()) as { Index: number }).Index;
        for (;;) {
          const s = (await (await fetch(`${secondary.url}/v1/acl/replication`, { headers: { 'X-Consul-Token': MANAGEMENT } })).json()) as {
            ReplicatedIndex: number;
          };
          if (s.ReplicatedIndex >= target) break;
          if (Date.now() > firstExpiry) throw new Error('the secondary did not catch up before the first expiry');
          await sleep(200);
        }
        process.stdout.write(`a secondary caught up in ${((performance.now() - t) / 1000).toFixed(1)} s\n`);
      }
      const lagBefore = secondary ? await histogram(secondary.url, LAG_METRIC, MANAGEMENT) : [];
      const rest: Window[] = [];
      const during: Window[] = [];
      const ids = stay;
      await readWindow(daemon.url, ids); // warm-up
      while (Date.now() + WINDOW_S * 1000 < firstExpiry) rest.push(await readWindow(daemon.url, ids));
      if (rest.length < 5) throw new Error(`only ${rest.length} windows at rest before the first expiry: raise the allowance`);
      const rssRest = (await memoryOf(daemon.proc.pid as number)).now;
      let gone: number | undefined;
      let lagP99: number | undefined;
      const target = STAY + 2; // the staying ones, the anonymous token and the management token
      const deadline = lastExpiry + 5 * 60_000 + 30_000;
      let held = STAY + N;
      while (Date.now() < deadline) {
        during.push(await readWindow(daemon.url, ids));
        held = await tokensHeld(daemon.url);
        if (held <= target) {
          gone = Date.now();
          break;
        }
      }
      const rssAfter = await memoryOf(daemon.proc.pid as number);
      let lagLine = '';
      if (secondary) {
        const after = await histogram(secondary.url, LAG_METRIC, MANAGEMENT);
        const delta = after.map(([le, n], i) => [le, n - (lagBefore[i]?.[1] ?? 0)] as [number, number]);
        lagP99 = quantile(delta, 0.99) * 1000;
        lagLine = `secondary apply lag: p50 ${(quantile(delta, 0.5) * 1000).toFixed(1)} ms, p99 ${lagP99.toFixed(1)} ms over ${delta[delta.length - 1]?.[1] ?? 0} batches`;
      }
      // The daemon asks LevelDB to compact the deleted range after a large reap; give it a moment.
      let after = du(store);
      for (let i = 0; i < 30 && after > before * 1.5; i++) {
        await sleep(2000);
        after = du(store);
      }
      const restRate = medianOf(rest.map((w) => w.rate));
      const restP99 = medianOf(rest.map((w) => w.p99));
      const reap = during.filter((w) => w.at >= firstExpiry);
      const rateRatio = medianOf(reap.map((w) => w.rate)) / restRate;
      const worstRate = Math.min(...reap.map((w) => w.rate)) / restRate;
      const p99Ratio = medianOf(reap.map((w) => w.p99)) / restP99;
      const worstP99 = Math.max(...reap.map((w) => w.p99)) / restP99;
      const reapS = gone === undefined ? undefined : (gone - lastExpiry) / 1000;
      const lines = [
        `tokens expiring: ${N} over 60 s, ${STAY} staying`,
        `reads at rest: ${restRate.toFixed(0)} req/s, p99 ${restP99.toFixed(1)} ms (median of ${rest.length} windows of ${WINDOW_S} s)`,
        `reads during the reap: ${rateRatio.toFixed(2)}× the rate at rest (worst window ${worstRate.toFixed(2)}×), p99 ${p99Ratio.toFixed(2)}× (worst ${worstP99.toFixed(2)}×) over ${reap.length} windows`,
        `all gone: ${
          reapS === undefined
            ? `NOT within 5.5 minutes of the last expiry: ${held - target} of ${N} left, ${((N - (held - target)) / ((Date.now() - firstExpiry) / 1000)).toFixed(0)} deleted a second`
            : `${reapS.toFixed(1)} s after the last expiry (${(N / ((gone as number) - firstExpiry) * 1000).toFixed(0)} deleted a second)`
        }`,
        `disk: ${mb(before)} before the tokens were made, ${mb(withTokens)} with them, ${mb(after)} after the reap (${(after / before).toFixed(2)}×)`,
        `RSS: ${mb(rssRest)} at rest, ${mb(rssAfter.now)} after the reap, peak ${mb(rssAfter.peak)}`,
        ...(lagLine ? [lagLine] : []),
      ];
      process.stdout.write(`${lines.join('\n')}\n`);
      const misses = [
        reapS === undefined || reapS > 300 ? 'expired tokens not all gone within 5 minutes of the last expiry' : '',
        rateRatio < 0.8 ? `reads fell to ${rateRatio.toFixed(2)}× (floor 0.8×)` : '',
        p99Ratio > 2 ? `read p99 rose to ${p99Ratio.toFixed(2)}× (ceiling 2×)` : '',
        after > before * 1.5 ? `disk ${(after / before).toFixed(2)}× of before (ceiling 1.5×)` : '',
        lagP99 !== undefined && !(lagP99 < 100) ? `secondary apply lag p99 ${lagP99.toFixed(1)} ms (ceiling 100 ms)` : '',
      ].filter(Boolean);
      for (const m of misses) process.stdout.write(`MISSED: ${m}\n`);
      process.exitCode = misses.length > 0 ? 1 : 0;
    } finally {
      if (pinned) unpinSelf();
      if (secondary) await stopDaemonProcess(secondary.proc);
      await stopDaemonProcess(daemon.proc);
    }
  } finally {
    // BENCH_KEEP=1: the data dir stays, to look into (its path is printed).
    if (process.env.BENCH_KEEP) process.stdout.write(`data dir kept: ${dir}\n`);
    else await rm(dir, { recursive: true, force: true });
  }
}

await main();
