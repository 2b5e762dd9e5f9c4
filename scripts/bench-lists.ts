/**
 * npm run bench:lists: paged and streamed token lists at BENCH_LISTS_TOKENS (default 10,000,000) tokens
 * (docs/http-api.md, "Paged lists"). Seeds the tokens straight into a store (every tenth linked to one
 * policy, each with one of 1,000 service identities), starts the daemon (as built) on CPU 1, and with the
 * load generator on CPU 0:
 * - the first page of each list after the start (the first walks in ID order make the table's ID order);
 * - after a round of 2 s a list not counted, BENCH_ROUNDS (at least 3) rounds in which one client pages through each list 1,000 at a time, following
 *   X-Service-Next-Cursor, for BENCH_DURATION seconds a list, under the token-read load of `npm run bench`
 *   (32 connections reading one token) and a trickle of writes (a token linked to the policy made and
 *   another deleted every 20 ms, so the order is kept under writes rather than made once): each page's time
 *   to its last byte, p99 over every page of every round;
 * - the whole list unpaged, streamed to a client that reads it as fast as it can, the daemon's RSS sampled
 *   every 100 ms: its growth while the list is sent, and the tokens received against those held.
 * Floors: a page of 1,000 (with and without a filter) at p99 <= 50 ms; RSS growth while streaming < 64 MB;
 * every token held received. Prints each floor beside its figure, writes them to bench-results/, and exits
 * non-zero when one is missed. BENCH_LISTS_KEEP=<dir>: seed into that directory and keep it, or use the
 * store a run before left there (seeding ten million takes minutes).
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import autocannon from 'autocannon';
import { canPin, medianOf, pinSelf, unpinSelf } from './bench-process.js';
import { rssBytes, seedTo } from './bench-seed.js';
import { startDaemonProcess, stopDaemonProcess, useBuiltDaemon } from './daemon-process.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TOKENS = Number(process.env.BENCH_LISTS_TOKENS ?? 10_000_000);
const DURATION = Number(process.env.BENCH_DURATION ?? 6);
const ROUNDS = Math.max(3, Number(process.env.BENCH_ROUNDS ?? 3));
const SECRET = 'bench-lists-management-secret';
const PAGE_P99_MS = 50;
const STREAM_GROWTH_MB = 64;
useBuiltDaemon();

/**
 * The paging client, on a thread of its own (its own event loop, so the read load's client does not
 * delay it): pages through each list for `seconds`, writing meanwhile; answers each list's page times.
 */
const PAGER = `
const { parentPort, workerData } = require('node:worker_threads');
const { url, secret, lists, seconds, policyID } = workerData;
const headers = { 'X-Service-Token': secret };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
(async () => {
  let writing = true;
  let writes = 0;
  const made = [];
  const writer = (async () => {
    while (writing) {
      const res = await fetch(url + '/v1/acl/token', { method: 'PUT', headers, body: JSON.stringify({ Description: 'bench-lists write', Policies: [{ ID: policyID }] }) });
      if (res.status !== 200) throw new Error('a create answered ' + res.status);
      made.push((await res.json()).AccessorID);
      if (made.length > 20) {
        const del = await fetch(url + '/v1/acl/token/' + made.shift(), { method: 'DELETE', headers });
        if (del.status !== 200) throw new Error('a delete answered ' + del.status);
        await del.arrayBuffer();
      }
      writes++;
      await sleep(20);
    }
  })();
  const out = {};
  for (const [name, query] of lists) {
    const times = [];
    const firstBytes = [];
    let cursor = '';
    let tokens = 0;
    const end = Date.now() + seconds * 1000;
    while (Date.now() < end) {
      const started = performance.now();
      const res = await fetch(url + '/v1/acl/tokens?per_page=1000' + query + (cursor ? '&cursor=' + cursor : ''), { headers });
      firstBytes.push(performance.now() - started);
      const body = await res.text();
      times.push(performance.now() - started);
      if (res.status !== 200) throw new Error(name + ': a page answered ' + res.status + ': ' + body);
      const n = JSON.parse(body).length;
      cursor = res.headers.get('x-service-next-cursor') ?? '';
      if (n !== 1000 && cursor) throw new Error(name + ': a page of ' + n + ' tokens before the last');
      tokens += n;
    }
    out[name] = { times, firstBytes, tokens };
  }
  writing = false;
  await writer;
  parentPort.postMessage({ lists: out, writes });
})().catch((e) => parentPort.postMessage({ error: String(e && e.stack || e) }));
`;

interface PagerResult {
  lists: Record<string, { times: number[]; firstBytes: number[]; tokens: number }>;
  writes: number;
}

function runPager(url: string, policyID: string, lists: Array<[string, string]>, seconds: number): Promise<PagerResult> {
  const worker = new Worker(PAGER, { eval: true, workerData: { url, secret: SECRET, lists, seconds, policyID } });
  return new Promise((resolve, reject) => {
    worker.once('message', (m: PagerResult & { error?: string }) => (m.error ? reject(new Error(m.error)) : resolve(m)));
    worker.once('error', reject);
  }).finally(() => worker.terminate()) as Promise<PagerResult>;
}

const percentile = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? Number.NaN;
};

async function api(url: string, method: string, path: string, body?: unknown): Promise<unknown> {
  const res = await fetch(`${url}${path}`, { method, headers: { 'X-Service-Token': SECRET }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  if (res.status !== 200) throw new Error(`${method} ${path} answered ${res.status}: ${await res.text()}`);
  return res.json();
}

/** The whole list unpaged, read as fast as it comes; the daemon's RSS sampled meanwhile. */
async function streamWhole(url: string, pid: number) {
  const before = await rssBytes(pid);
  let peak = before;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      peak = Math.max(peak, await rssBytes(pid));
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const started = performance.now();
  const res = await fetch(`${url}/v1/acl/tokens`, { headers: { 'X-Service-Token': SECRET } });
  if (res.status !== 200 || res.body === null) throw new Error(`the whole list answered ${res.status}`);
  // Tokens counted by their AccessorID fields, a field split between two chunks found by keeping the tail.
  const marker = Buffer.from('"AccessorID":');
  let tokens = 0;
  let bytes = 0;
  let tail = Buffer.alloc(0);
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    bytes += chunk.length;
    const text = Buffer.concat([tail, chunk]);
    for (let at = text.indexOf(marker); at !== -1; at = text.indexOf(marker, at + marker.length)) tokens++;
    tail = text.subarray(Math.max(0, text.length - marker.length + 1));
  }
  const seconds = (performance.now() - started) / 1000;
  sampling = false;
  await sampler;
  return { tokens, bytes, seconds, before, peak };
}

async function main(): Promise<void> {
  const keep = process.env.BENCH_LISTS_KEEP;
  const dataDir = keep ?? (await mkdtemp(join(tmpdir(), 'watchword-lists-')));
  let proc: Awaited<ReturnType<typeof startDaemonProcess>>['proc'] | undefined;
  try {
    const seeded = join(dataDir, 'bench-lists.json');
    const kept = keep === undefined ? undefined : await readFile(seeded, 'utf8').then((t) => JSON.parse(t) as { policy: string; accessor: string; tokens: number }, () => undefined);
    let policy: { ID: string };
    let accessor: string | undefined;
    if (kept !== undefined && kept.tokens === TOKENS) {
      policy = { ID: kept.policy };
      accessor = kept.accessor;
      process.stdout.write(`using the ${TOKENS} tokens seeded in ${dataDir}\n`);
    } else {
      if (keep !== undefined) {
        await rm(dataDir, { recursive: true, force: true });
        await mkdir(dataDir, { recursive: true });
      }
      // A fresh daemon makes the management token and the policy the seeded tokens link to.
      const first = await startDaemonProcess(dataDir, ['--initial-management-token', SECRET]);
      policy = (await api(first.url, 'PUT', '/v1/acl/policy', { Name: 'bench-lists', Rules: 'acl = "read"' })) as { ID: string };
      await stopDaemonProcess(first.proc);
      const t = performance.now();
      await seedTo(join(dataDir, 'store'), 0, TOKENS, {
        made: (id) => {
          accessor ??= id;
        },
        links: (i) => (i % 10 === 0 ? { Policies: [{ ID: policy.ID }] } : {}),
      });
      process.stdout.write(`seeded ${TOKENS} tokens in ${((performance.now() - t) / 1000).toFixed(1)} s\n`);
      if (keep !== undefined) await writeFile(seeded, JSON.stringify({ policy: policy.ID, accessor, tokens: TOKENS }));
    }

    const pinned = canPin();
    const t = performance.now();
    const daemon = await startDaemonProcess(dataDir, ['--initial-management-token', SECRET], undefined, pinned ? '1' : undefined, 600_000);
    proc = daemon.proc;
    const pid = proc.pid as number;
    process.stdout.write(`started in ${((performance.now() - t) / 1000).toFixed(1)} s\n`);
    if (pinned) pinSelf('0');
    const lists: Array<[string, string]> = [
      ['all', ''],
      [`policy (${TOKENS / 10} tokens)`, `&policy=${policy.ID}`],
      [`servicename (${TOKENS / 1000} tokens)`, '&servicename=svc-7'],
    ];

    // The first page of each after the start, the RSS before and after (the ID order made).
    const rssStart = await rssBytes(pid);
    const firstPages: Record<string, number> = {};
    for (const [name, query] of lists) {
      const started = performance.now();
      const res = await fetch(`${daemon.url}/v1/acl/tokens?per_page=1000${query}`, { headers: { 'X-Service-Token': SECRET } });
      await res.text();
      if (res.status !== 200) throw new Error(`${name}: the first page answered ${res.status}`);
      firstPages[name] = Math.round(performance.now() - started);
    }
    const rssOrdered = await rssBytes(pid);

    const times: Record<string, number[]> = Object.fromEntries(lists.map(([name]) => [name, []]));
    const firstBytes: Record<string, number[]> = Object.fromEntries(lists.map(([name]) => [name, []]));
    const roundP99: Record<string, number[]> = Object.fromEntries(lists.map(([name]) => [name, []]));
    const reads: number[] = [];
    let writes = 0;
    // A round of 2 s a list first, not counted (as the other benches warm up before their rounds).
    await runPager(daemon.url, policy.ID, lists, 2);
    for (let round = 0; round < ROUNDS; round++) {
      const load = autocannon({
        url: `${daemon.url}/v1/acl/token/${accessor}`,
        connections: 32,
        duration: DURATION * lists.length + 1,
        headers: { 'X-Service-Token': SECRET },
      });
      const paged = await runPager(daemon.url, policy.ID, lists, DURATION);
      const r = await load;
      if (r.non2xx > 0 || r.errors > 0) throw new Error(`the read load: ${r.non2xx} non-2xx answers, ${r.errors} errors`);
      reads.push(Math.round(r.requests.average));
      writes += paged.writes;
      for (const [name] of lists) {
        const l = paged.lists[name] as { times: number[]; firstBytes: number[] };
        times[name]?.push(...l.times);
        firstBytes[name]?.push(...l.firstBytes);
        roundP99[name]?.push(percentile(l.times, 99));
      }
    }

    const held = ((await api(daemon.url, 'GET', '/v1/agent/self')) as { Stats: { Tokens: number } }).Stats.Tokens;
    const stream = await streamWhole(daemon.url, pid);
    if (pinned) unpinSelf();
    const mb = (b: number) => Math.round(b / 1048576);
    console.table(
      lists.map(([name]) => {
        const xs = times[name] as number[];
        return {
          list: name,
          'first page after start, ms': firstPages[name],
          pages: xs.length,
          'p50 ms': +percentile(xs, 50).toFixed(1),
          'p99 ms': +percentile(xs, 99).toFixed(1),
          'p99 of each round, ms': (roundP99[name] as number[]).map((x) => x.toFixed(1)).join(' / '),
          'max ms': +Math.max(...xs).toFixed(1),
          'first byte p50 / p99 ms': `${percentile(firstBytes[name] as number[], 50).toFixed(1)} / ${percentile(firstBytes[name] as number[], 99).toFixed(1)}`,
        };
      }),
    );
    process.stdout.write(
      `read load: median ${medianOf(reads)} req/s; ${writes} tokens made (and as many deleted) while paging; RSS ${mb(rssStart)} MB after the start, ${mb(rssOrdered)} MB after the first pages (the ID order made)\n` +
        `streamed the whole list: ${stream.tokens} tokens, ${mb(stream.bytes)} MB in ${stream.seconds.toFixed(1)} s; RSS ${mb(stream.before)} MB before, ${mb(stream.peak)} MB at most while sent\n` +
        `${pinned ? 'daemon on CPU 1, clients on CPU 0' : 'not pinned (taskset or a second CPU missing)'}\n`,
    );
    const checks = [
      ...lists.map(([name]) => {
        const p99 = percentile(times[name] as number[], 99);
        return { what: `a page of 1,000 of ${name} under the read load, p99 of every page`, figure: `${p99.toFixed(1)} ms`, floor: `<= ${PAGE_P99_MS} ms`, ok: p99 <= PAGE_P99_MS };
      }),
      {
        what: `RSS growth while ${TOKENS} tokens are streamed unpaged`,
        figure: `${mb(stream.peak - stream.before)} MB`,
        floor: `< ${STREAM_GROWTH_MB} MB`,
        ok: stream.peak - stream.before < STREAM_GROWTH_MB * 1048576,
      },
      { what: 'tokens streamed against tokens held', figure: `${stream.tokens} of ${held}`, floor: 'all', ok: stream.tokens === held },
    ];
    console.table(checks);
    await mkdir(join(ROOT, 'bench-results'), { recursive: true });
    const file = join(ROOT, 'bench-results', `lists-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    const summary = Object.fromEntries(lists.map(([name]) => [name, { p50: percentile(times[name] as number[], 50), p99: percentile(times[name] as number[], 99), pages: times[name]?.length, roundP99: roundP99[name] }]));
    await writeFile(file, `${JSON.stringify({ date: new Date().toISOString(), tokens: TOKENS, pinned, firstPages, pages: summary, reads, writes, rss: { start: rssStart, ordered: rssOrdered }, stream, checks }, null, 2)}\n`);
    process.stdout.write(`wrote ${file}\n`);
    if (checks.some((c) => !c.ok)) process.exitCode = 1;
  } finally {
    if (proc) await stopDaemonProcess(proc);
    if (keep === undefined) await rm(dataDir, { recursive: true, force: true });
  }
}

await main();
