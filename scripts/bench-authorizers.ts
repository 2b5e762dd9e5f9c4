/**
 * `npm run bench:authorizers [CLIENTS] [TOKENS]` (docs/development.md, "Development"; docs/enforcing-client.md, "Enforcing
 * clients at scale"): CLIENTS enforcing clients (default 100), each caching the same TOKENS
 * tokens (default 10,000), against one server. The clients live in PROCESSES processes
 * (BENCH_AUTHZ_PROCESSES, default 10; scripts/bench-authorizers-worker.ts), as a service's
 * instances would. The server runs on CPU 1 and the clients on CPU 0 (where the machine can pin). It reports:
 * - how long the clients take to load every token (CLIENTS × TOKENS first look-ups) over their
 *   watches, against the same clients without a watch making each a request (BENCH_AUTHZ_HTTP_SHARE,
 *   default 1: the share of TOKENS the HTTP clients load; below 1 the HTTP time is its rate
 *   scaled to every token, and says so): the watch at least 3× faster;
 * - the server's RSS before any client and once every client holds every token (growth ≤ 1 GB);
 * - TCP connections per client at rest (≤ 1: its watch);
 * - the server's CPU at rest over 60 s with every token watched (≤ 5% of a core), beside the same
 *   daemon's CPU before any client connected;
 * - for tokens deleted one at a time, how long after the delete was sent each client refuses it
 *   (p99 ≤ 100 ms);
 * - whether the clients' cached tokens show as used (their LastUsedTime).
 * It fails (exit 1) when a figure its header names is missed.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { canPin, pinSelf, unpinSelf } from './bench-process.js';
import { memoryOf, seedTo } from './bench-seed.js';
import { startDaemonProcess, stopDaemonProcess } from './daemon-process.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLIENTS = Number(process.argv[2] ?? 100);
const TOKENS = Number(process.argv[3] ?? 10_000);
const PROCESSES = Number(process.env.BENCH_AUTHZ_PROCESSES ?? 10);
const HTTP_SHARE = Math.min(1, Math.max(0.01, Number(process.env.BENCH_AUTHZ_HTTP_SHARE ?? 0.1)));
const DELETES = 50;
const REST_S = Number(process.env.BENCH_AUTHZ_REST_S ?? 60);
const MANAGEMENT = '6b1f7d0e-1111-4222-8333-944444444444';

const mb = (b: number) => `${(b / 1024 / 1024).toFixed(0)} MB`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** CPU seconds a process has used (user + system), from /proc. */
async function cpuSeconds(pid: number): Promise<number> {
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** CPU seconds of each thread of a process (by thread ID and name), from /proc. */
async function threadSeconds(pid: number): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const tid of await readdir(`/proc/${pid}/task`)) {
    const stat = await readFile(`/proc/${pid}/task/${tid}/stat`, 'utf8').catch(() => '');
    const fields = stat.split(') ')[1]?.split(' ') ?? [];
    out.set(`${tid} ${stat.slice(stat.indexOf('(') + 1, stat.indexOf(')'))}`, (Number(fields[11]) + Number(fields[12])) / 100);
  }
  return out;
}

/** Established TCP connections to the server's port. */
function connectionsTo(port: string): number {
  const out = execFileSync('ss', ['-Htn', 'state', 'established', `( sport = :${port} )`], { encoding: 'utf8' });
  return out.split('\n').filter((l) => l.trim() !== '').length;
}

async function watchedTokens(url: string): Promise<number> {
  const text = await (await fetch(`${url}/v1/agent/metrics?format=prometheus`, { headers: { 'X-Consul-Token': MANAGEMENT } })).text();
  return Number(/^watchword_authorizer_watched_tokens (\d+)/m.exec(text)?.[1] ?? 0);
}

/** A worker process of clients, and a way to wait for its next message of a kind. */
interface Worker {
  proc: ChildProcess;
  next<T>(kind: string): Promise<T>;
}

function startWorker(url: string, secretsFile: string, clients: number, mode: 'watch' | 'http', cpu: string | undefined): Worker {
  const args = ['--max-old-space-size=4096', ...(process.env.BENCH_AUTHZ_WORKER_FLAGS?.split(' ') ?? []), '--import', 'tsx', 'scripts/bench-authorizers-worker.ts', url, secretsFile, String(clients), MANAGEMENT, mode];
  const proc =
    cpu === undefined
      ? spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
      : spawn('taskset', ['-c', cpu, process.execPath, ...args], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const waiting = new Map<string, Array<{ resolve: (m: unknown) => void; reject: (e: Error) => void }>>();
  proc.on('message', (m: { t: string }) => waiting.get(m.t)?.shift()?.resolve(m));
  proc.once('exit', (code) => {
    for (const list of waiting.values()) for (const w of list.splice(0)) w.reject(new Error(`a worker exited with ${code}`));
  });
  return {
    proc,
    next: <T>(kind: string) =>
      new Promise<T>((resolve, reject) => {
        const list = waiting.get(kind) ?? [];
        waiting.set(kind, list);
        list.push({ resolve: resolve as (m: unknown) => void, reject });
      }),
  };
}

/**
 * Deletes tokens one at a time; for each, how long after the delete was sent each client refused
 * it (ms), and how long the delete itself took to be answered (durable).
 */
/** One delete: when the first and the last client refused it and the delete was answered (ms from sent); the server's and the clients' event loops held at most meanwhile. */
interface Revocation {
  first: number;
  last: number;
  answered: number;
  lag: number;
  clientLag: number;
}

async function revocations(
  url: string,
  workers: Worker[],
  tokens: Array<{ accessor: string; secret: string }>,
): Promise<{ times: number[]; afterAnswer: number[]; deletes: number[]; each: Revocation[] }> {
  const out = { times: [] as number[], afterAnswer: [] as number[], deletes: [] as number[], each: [] as Revocation[] };
  await serverLagMs(url);
  for (const t of tokens) {
    const at = performance.timeOrigin + performance.now();
    const answers = workers.map((w) => w.next<{ times: number[]; lagMs: number }>('refused'));
    for (const w of workers) w.proc.send({ t: 'revoke', secret: t.secret, at });
    const res = await fetch(`${url}/v1/acl/token/${t.accessor}`, { method: 'DELETE', headers: { 'X-Consul-Token': MANAGEMENT } });
    const answered = performance.timeOrigin + performance.now() - at;
    if (!res.ok) throw new Error(`the delete of ${t.accessor} failed: ${res.status}`);
    out.deletes.push(answered);
    const got = await Promise.all(answers);
    const times = got.flatMap((a) => a.times);
    for (const ms of times) {
      out.times.push(ms);
      out.afterAnswer.push(Math.max(0, ms - answered));
    }
    // Whether a slow one was slow at the server (its event loop held) or at some clients only.
    out.each.push({
      first: Math.min(...times),
      last: Math.max(...times),
      answered,
      lag: await serverLagMs(url),
      clientLag: Math.max(...got.map((a) => a.lagMs)),
    });
    await sleep(100);
  }
  return out;
}

/** The longest the server's event loop was held since the last time this was asked (ms; its metric resets on each scrape). */
async function serverLagMs(url: string): Promise<number> {
  const text = await (await fetch(`${url}/v1/agent/metrics?format=prometheus`, { headers: { 'X-Consul-Token': MANAGEMENT } })).text();
  return Number(/^watchword_nodejs_eventloop_lag_max_seconds (\S+)/m.exec(text)?.[1] ?? Number.NaN) * 1000;
}

/** Every worker loads every token; how long it took, how many are cached, and how many first look-ups timed out. */
async function loadEvery(workers: Worker[]): Promise<{ seconds: number; cached: number; timedOut: number }> {
  await Promise.all(workers.map((w) => w.next('ready')));
  const t = performance.now();
  const loads = await Promise.all(
    workers.map((w) => {
      const done = w.next<{ cached: number; timedOut: number }>('loaded');
      w.proc.send({ t: 'load' });
      return done;
    }),
  );
  return {
    seconds: (performance.now() - t) / 1000,
    cached: loads.reduce((n, l) => n + l.cached, 0),
    timedOut: loads.reduce((n, l) => n + l.timedOut, 0),
  };
}

async function closeWorker(w: Worker): Promise<void> {
  if (w.proc.exitCode !== null) return;
  const exited = new Promise((r) => w.proc.once('exit', r));
  w.proc.send({ t: 'close' });
  await exited;
}

const quantileOf = (xs: number[], q: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] as number;
};

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'bench-authorizers-'));
  const pinned = canPin();
  const tokens: Array<{ accessor: string; secret: string }> = [];
  await seedTo(join(dir, 'store'), 0, TOKENS, { made: (accessor, secret) => tokens.push({ accessor, secret }) });
  const secretsFile = join(dir, 'secrets.json');
  await writeFile(secretsFile, JSON.stringify(tokens.map((x) => x.secret)));
  // The clients share one address here (100 services would have 100): the per-address cap is raised to let them in.
  const flags = ['--initial-management-token', MANAGEMENT, '--http-max-conns-per-client', '0'];
  const daemon = await startDaemonProcess(dir, flags, undefined, pinned ? '1' : undefined, 120_000);
  const pid = daemon.proc.pid as number;
  const port = new URL(daemon.url).port;
  const per = Math.ceil(CLIENTS / PROCESSES);
  const workers: Worker[] = [];
  try {
    await sleep(5_000);
    const rssBefore = (await memoryOf(pid)).now;
    let cpu0 = await cpuSeconds(pid);
    await sleep(REST_S * 1000);
    const cpuIdle = ((await cpuSeconds(pid)) - cpu0) / REST_S;
    process.stdout.write(
      `${CLIENTS} clients × ${TOKENS} tokens against one server, in ${PROCESSES} processes (${pinned ? 'server on CPU 1, clients on CPU 0' : 'not pinned'})\n`,
    );
    if (pinned) pinSelf('0');
    const clientCpu = pinned ? '0' : undefined;
    // The baseline first: the same clients without a watch, each first look-up a request.
    const httpSecrets = join(dir, 'secrets-http.json');
    await writeFile(httpSecrets, JSON.stringify(tokens.slice(0, Math.max(1, Math.round(TOKENS * HTTP_SHARE))).map((x) => x.secret)));
    const httpWorkers: Worker[] = [];
    for (let i = 0; i < CLIENTS; i += per) httpWorkers.push(startWorker(daemon.url, httpSecrets, Math.min(per, CLIENTS - i), 'http', clientCpu));
    const http = await loadEvery(httpWorkers);
    await Promise.all(httpWorkers.map(closeWorker));
    const httpPerToken = http.seconds / Math.max(1, http.cached);
    process.stdout.write(
      `over HTTP (no watch): ${http.cached} first look-ups in ${http.seconds.toFixed(1)} s (${Math.round(http.cached / http.seconds)} a second)` +
        `${http.timedOut > 0 ? `, ${http.timedOut} timed out and were asked again` : ''}\n`,
    );
    for (let i = 0; i < CLIENTS; i += per) workers.push(startWorker(daemon.url, secretsFile, Math.min(per, CLIENTS - i), 'watch', clientCpu));
    const load = await loadEvery(workers);
    const cached = load.cached;
    const httpAll = httpPerToken * CLIENTS * TOKENS;
    const speedup = httpAll / load.seconds;
    process.stdout.write(
      `over the watch: every client loaded every token in ${load.seconds.toFixed(1)} s (${Math.round(cached / load.seconds)} a second): ${cached} cached` +
        `${load.timedOut > 0 ? ` (${load.timedOut} first look-ups timed out and were asked again)` : ''}; ` +
        `${speedup.toFixed(2)}x faster than over HTTP (${httpAll.toFixed(1)} s for ${CLIENTS * TOKENS}${HTTP_SHARE < 1 ? `, scaled from ${http.cached}` : ''})\n`,
    );
    const t = performance.now();
    for (;;) {
      const watched = await watchedTokens(daemon.url);
      if (watched >= CLIENTS * TOKENS) break;
      if (performance.now() - t > 120_000) throw new Error(`not every token on a watch within 2 minutes: ${watched} watched, ${cached} cached`);
      await sleep(500);
    }
    // At rest: idle HTTP connections close (keep-alive), beats only.
    await sleep(10_000);
    const rssWatching = (await memoryOf(pid)).now;
    const connections = connectionsTo(port);
    cpu0 = await cpuSeconds(pid);
    const threads0 = await threadSeconds(pid);
    await sleep(REST_S * 1000);
    const cpuAtRest = ((await cpuSeconds(pid)) - cpu0) / REST_S;
    const threads = [...(await threadSeconds(pid))]
      .map(([k, v]) => [k, (v - (threads0.get(k) ?? 0)) / REST_S] as const)
      .filter(([, v]) => v > 0)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k.split(' ').slice(1).join(' ')} ${(v * 100).toFixed(2)}%`);
    const connectionsLater = connectionsTo(port);
    if (process.env.BENCH_AUTHZ_REST_ONLY) {
      process.stdout.write(`server CPU at rest: ${(cpuAtRest * 100).toFixed(2)}% of a core (before any client: ${(cpuIdle * 100).toFixed(2)}%); by thread: ${threads.join(', ')}\n`);
      return;
    }
    await Promise.all(
      workers.map((w) => {
        const quiet = w.next('quiet');
        w.proc.send({ t: 'quiet' });
        return quiet;
      }),
    );
    const { times, afterAnswer, deletes, each } = await revocations(daemon.url, workers, tokens.slice(0, DELETES));
    const slowest = [...each].sort((a, b) => b.last - a.last).slice(0, 3);
    // The clients report uses every 30 s, the server writes them every last_used_flush (60 s).
    const sample = tokens.slice(DELETES, DELETES + 20);
    let used = 0;
    for (let wait = 0; wait < 100 && used < sample.length; wait++) {
      used = 0;
      for (const x of sample) {
        const res = await fetch(`${daemon.url}/v1/acl/token/${x.accessor}`, { headers: { 'X-Consul-Token': MANAGEMENT } });
        if (typeof ((await res.json()) as { LastUsedTime?: string }).LastUsedTime === 'string') used++;
      }
      if (used < sample.length) await sleep(1_000);
    }
    const perClient = Math.max(connections, connectionsLater) / CLIENTS;
    const speedupMiss = speedup < 3 ? `first look-ups over the watch ${speedup.toFixed(2)}x as fast as over HTTP (floor 3x)` : '';
    const p99 = quantileOf(times, 0.99);
    const lines = [
      `server RSS: ${mb(rssBefore)} before the clients, ${mb(rssWatching)} with every token watched (growth ${mb(rssWatching - rssBefore)})`,
      `connections at rest: ${connections}, ${connectionsLater} ${REST_S} s later (${perClient.toFixed(2)} per client)`,
      `server CPU at rest: ${(cpuAtRest * 100).toFixed(2)}% of a core over ${REST_S} s (the same daemon before any client: ${(cpuIdle * 100).toFixed(2)}%)`,
      `revocation: ${DELETES} tokens deleted one at a time, each refused by all ${CLIENTS} clients: p50 ${quantileOf(times, 0.5).toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${Math.max(...times).toFixed(1)} ms from the delete sent; ` +
        `p50 ${quantileOf(afterAnswer, 0.5).toFixed(1)} ms, p99 ${quantileOf(afterAnswer, 0.99).toFixed(1)} ms after its answer; the delete itself answered in p50 ${quantileOf(deletes, 0.5).toFixed(1)} ms, max ${Math.max(...deletes).toFixed(1)} ms`,
      `slowest deletes (ms from sent: first client, last client; delete answered; event loop held at most at the server, at a client process): ${slowest
        .map((e) => `${e.first.toFixed(0)}-${e.last.toFixed(0)}; ${e.answered.toFixed(0)}; ${e.lag.toFixed(0)}, ${e.clientLag.toFixed(0)}`)
        .join(' | ')}`,
      `last use: ${used} of ${sample.length} sampled tokens show a LastUsedTime`,
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
    const misses = [
      rssWatching - rssBefore > 1024 ** 3 ? `server RSS grew by ${mb(rssWatching - rssBefore)} (ceiling 1 GB)` : '',
      speedupMiss,
      perClient > 1 ? `${perClient.toFixed(2)} connections per client (ceiling 1: its watch)` : '',
      cpuAtRest > 0.05 ? `server CPU at rest ${(cpuAtRest * 100).toFixed(2)}% (ceiling 5%)` : '',
      !(p99 <= 100) ? `revocation p99 ${p99.toFixed(1)} ms (ceiling 100 ms)` : '',
      used < sample.length ? `${sample.length - used} of ${sample.length} watched tokens show no last use` : '',
    ].filter(Boolean);
    for (const m of misses) process.stdout.write(`MISSED: ${m}\n`);
    process.exitCode = misses.length > 0 ? 1 : 0;
  } finally {
    await Promise.all(workers.map(closeWorker));
    if (pinned) unpinSelf();
    await stopDaemonProcess(daemon.proc);
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
