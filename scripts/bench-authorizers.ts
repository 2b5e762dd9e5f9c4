/**
 * `npm run bench:authorizers [CLIENTS] [TOKENS]` (README, "Development"; SPEC §20, "Enforcing
 * clients at scale"): CLIENTS enforcing clients (default 100), each caching the same TOKENS
 * tokens (default 10,000), against one server. The server runs on CPU 1, the clients in this
 * process on CPU 0 (where the machine can pin). It reports:
 * - the server's RSS before any client and once every client holds every token (growth ≤ 1 GB);
 * - TCP connections per client at rest (≤ 2: its watch and at most one HTTP connection);
 * - the server's CPU at rest over 30 s with every token watched (≤ 5% of a core);
 * - for tokens deleted one at a time, how long until each client refuses it (p99 ≤ 100 ms);
 * - whether the clients' cached tokens show as used (their LastUsedTime).
 * It fails (exit 1) when a figure of SPEC §20 is missed.
 */
import { execFileSync } from 'node:child_process';
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Authorizer } from '../src/client/authorizer.js';
import { canPin, pinSelf, unpinSelf } from './bench-process.js';
import { memoryOf, seedTo } from './bench-seed.js';
import { startDaemonProcess, stopDaemonProcess } from './daemon-process.js';

const CLIENTS = Number(process.argv[2] ?? 100);
const TOKENS = Number(process.argv[3] ?? 10_000);
const DELETES = 50;
const REST_S = 30;
const MANAGEMENT = '6b1f7d0e-1111-4222-8333-944444444444';

const mb = (b: number) => `${(b / 1024 / 1024).toFixed(0)} MB`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** CPU seconds a process has used (user + system), from /proc. */
async function cpuSeconds(pid: number): Promise<number> {
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Established TCP connections to the server's port. */
function connectionsTo(port: string): number {
  const out = execFileSync('ss', ['-Htn', 'state', 'established', `( sport = :${port} )`], { encoding: 'utf8' });
  return out.split('\n').filter((l) => l.trim() !== '').length;
}

/** Loads every token into every client, a few at a time per client; `loaded[i]`: how far client i has come. */
async function loadAll(clients: Authorizer[], secrets: string[], loaded: number[]): Promise<void> {
  await Promise.all(
    clients.map(async (authz, c) => {
      let next = 0;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (next < secrets.length) {
            const s = secrets[next++] as string;
            if ((await authz.allowed(s, 'service', 'svc-0', 'read')) === undefined) throw new Error('no answer');
            loaded[c] = Math.max(loaded[c] ?? 0, next - 8);
          }
        }),
      );
    }),
  );
}

async function watchedTokens(url: string): Promise<number> {
  const text = await (await fetch(`${url}/v1/agent/metrics?format=prometheus`, { headers: { 'X-Consul-Token': MANAGEMENT } })).text();
  return Number(/^watchword_authorizer_watched_tokens (\d+)/m.exec(text)?.[1] ?? 0);
}

/** Deletes tokens one at a time; for each, the time until each client refuses it (ms). */
async function revocations(url: string, clients: Authorizer[], tokens: Array<{ accessor: string; secret: string }>): Promise<number[]> {
  const times: number[] = [];
  for (const t of tokens) {
    const seen = new Array<number | undefined>(clients.length).fill(undefined);
    const started = performance.now();
    const deleted = fetch(`${url}/v1/acl/token/${t.accessor}`, { method: 'DELETE', headers: { 'X-Consul-Token': MANAGEMENT } });
    while (seen.some((s) => s === undefined)) {
      if (performance.now() - started > 30_000) throw new Error(`a client still allowed ${t.accessor} 30 s after its delete`);
      clients.forEach((authz, i) => {
        if (seen[i] === undefined && authz.allowed(t.secret, 'service', 'svc-0', 'read') === false) seen[i] = performance.now() - started;
      });
      await new Promise((r) => setImmediate(r));
    }
    if (!(await deleted).ok) throw new Error(`the delete of ${t.accessor} failed`);
    times.push(...(seen as number[]));
    await sleep(100);
  }
  return times;
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
  // The clients share one address here (100 services would have 100): the per-address cap is raised to let them in.
  const flags = ['--initial-management-token', MANAGEMENT, '--last-used-flush', '5s', '--http-max-conns-per-client', '0'];
  const daemon = await startDaemonProcess(dir, flags, undefined, pinned ? '1' : undefined, 120_000);
  const pid = daemon.proc.pid as number;
  const port = new URL(daemon.url).port;
  const clients = Array.from({ length: CLIENTS }, () => new Authorizer({ client: { address: daemon.url } }));
  // A service asks about its callers' tokens all the time: every cached token is asked about every
  // 20 s (a token unused for two TTLs is forgotten), a million synchronous answers each time.
  const secretsOf = tokens.map((x) => x.secret);
  const loaded: number[] = clients.map(() => 0);
  let asking = true;
  let keepAsking: Promise<void> = Promise.resolve();
  const askAll = () => {
    keepAsking = (async () => {
      while (asking) {
        await sleep(20_000);
        clients.forEach((authz, c) => {
          for (let i = 0; i < (loaded[c] ?? 0); i++) authz.allowed(secretsOf[i] as string, 'service', 'svc-0', 'read');
        });
      }
    })();
  };
  try {
    await sleep(2_000);
    const rssBefore = (await memoryOf(pid)).now;
    process.stdout.write(`${CLIENTS} clients × ${TOKENS} tokens against one server (${pinned ? 'server on CPU 1, clients on CPU 0' : 'not pinned'})\n`);
    let t = performance.now();
    const secrets = tokens.map((x) => x.secret);
    // Loading is set-up, not measured: it may use both cores.
    askAll();
    await loadAll(clients, secrets, loaded);
    process.stdout.write(`every client loaded every token in ${((performance.now() - t) / 1000).toFixed(1)} s\n`);
    if (pinned) pinSelf('0');
    t = performance.now();
    while ((await watchedTokens(daemon.url)) < CLIENTS * TOKENS) {
      if (performance.now() - t > 120_000) throw new Error('not every token on a watch within 2 minutes');
      await sleep(500);
    }
    // At rest: idle HTTP connections close (keep-alive), beats only.
    await sleep(10_000);
    const rssWatching = (await memoryOf(pid)).now;
    const connections = connectionsTo(port);
    const cpu0 = await cpuSeconds(pid);
    await sleep(REST_S * 1000);
    const cpuAtRest = ((await cpuSeconds(pid)) - cpu0) / REST_S;
    const connectionsLater = connectionsTo(port);
    // Every client still holds every token (none was forgotten: each is asked about every 20 s).
    await loadAll(clients, secrets, loaded);
    const times = await revocations(daemon.url, clients, tokens.slice(0, DELETES));
    await sleep(7_000);
    const sample = tokens.slice(DELETES, DELETES + 20);
    let used = 0;
    for (const x of sample) {
      const res = await fetch(`${daemon.url}/v1/acl/token/${x.accessor}`, { headers: { 'X-Consul-Token': MANAGEMENT } });
      if (typeof ((await res.json()) as { LastUsedTime?: string }).LastUsedTime === 'string') used++;
    }
    const perClient = Math.max(connections, connectionsLater) / CLIENTS;
    const p99 = quantileOf(times, 0.99);
    const lines = [
      `server RSS: ${mb(rssBefore)} before the clients, ${mb(rssWatching)} with every token watched (growth ${mb(rssWatching - rssBefore)})`,
      `connections at rest: ${connections}, ${connectionsLater} ${REST_S} s later (${perClient.toFixed(2)} per client)`,
      `server CPU at rest: ${(cpuAtRest * 100).toFixed(2)}% of a core over ${REST_S} s`,
      `revocation: ${DELETES} tokens deleted one at a time, each refused by all ${CLIENTS} clients: p50 ${quantileOf(times, 0.5).toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${Math.max(...times).toFixed(1)} ms`,
      `last use: ${used} of ${sample.length} sampled tokens show a LastUsedTime`,
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
    const misses = [
      rssWatching - rssBefore > 1024 ** 3 ? `server RSS grew by ${mb(rssWatching - rssBefore)} (ceiling 1 GB)` : '',
      perClient > 2 ? `${perClient.toFixed(2)} connections per client (ceiling 2)` : '',
      cpuAtRest > 0.05 ? `server CPU at rest ${(cpuAtRest * 100).toFixed(2)}% (ceiling 5%)` : '',
      !(p99 <= 100) ? `revocation p99 ${p99.toFixed(1)} ms (ceiling 100 ms)` : '',
      used < sample.length ? `${sample.length - used} of ${sample.length} watched tokens show no last use` : '',
    ].filter(Boolean);
    for (const m of misses) process.stdout.write(`MISSED: ${m}\n`);
    process.exitCode = misses.length > 0 ? 1 : 0;
  } finally {
    asking = false;
    await keepAsking;
    for (const c of clients) c.close();
    if (pinned) unpinSelf();
    await stopDaemonProcess(daemon.proc);
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
