/**
 * `npm run bench:churn [MINUTES]` (docs/development.md, "Development"; docs/http-api.md, "Last use and idle login tokens"): workloads that
 * log in every time they start, for MINUTES (default 10). A primary (dc1) and a secondary (dc2),
 * both on CPU 1; this process, the load, on CPU 0 (where the machine can pin).
 * - Logins through jwt methods (static keys) at a fixed rate: CHURN_RATE a second (default 40)
 *   at dc1 through a method whose tokens are global, as many at dc2 through one whose tokens are
 *   Local; both methods' MaxTokenTTL is CHURN_TTL (default 2m). A quarter of the workloads log out
 *   before their token expires; the others use it now and then until it expires, and once more
 *   just after: a 200 then is a token that authenticated after its ExpirationTime.
 * - Steady reads of long-lived tokens at both datacenters, at rest before the churn and during it.
 * Every 20 s: logins a second and their p99, live tokens, RSS and disk (LevelDB and the audit log)
 * of each daemon, read p99. At the end: the replication lag p99 at dc2, tokens that authenticated
 * after expiry (must be 0), when each bounded part was full (the primary's change-log tail and its log on disk,
 * the audit log's rotated files, the window of recent checks, each daemon's bytes of replaced and
 * deleted tokens, full once first reclaimed) and whether RSS and disk stayed flat
 * (within 10%: the peaks of 5-minute windows, the samples' own spread printed beside them) from
 * then on, naming any part the run was too short to fill; and the login
 * ceiling: closed-loop logins at dc1 against raw LevelDB synced puts, in the same run (median
 * of 3 rounds each).
 * CHURN_HEAP_DIR=<dir>: heap snapshots of both daemons into that directory, after the first MaxTokenTTL and at the
 * end (still under the churn), `dc1-first-ttl.heapsnapshot`, `dc1-end.heapsnapshot` and dc2's likewise, for
 * `npx tsx scripts/heap-compare.ts` (the largest retainers of each, side by side).
 * CHURN_ROWS=<file>: every sample appended to that file as a JSON line, with each daemon's V8 heap (used, total) and
 * external memory beside its RSS.
 * The audit log rotates at 2 MiB × 4 files here (audit_log_rotate_bytes, _max_files): a log that
 * grows with every login is flat only once it rotates, as an operator sizes it. The checks noted
 * for dry runs reach back 8 minutes (recent_checks_window), and the primary keeps 25,000
 * change-log entries on disk (log_retention), so those parts fill within the first ten minutes
 * of a 30-minute run.
 */
import { appendFileSync, readdirSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { SignJWT, exportSPKI, generateKeyPair } from 'jose';
import { canPin, diskUsage, medianOf, pinSelf, startProcess, unpinSelf } from './bench-process.js';
import { memoryOf } from './bench-seed.js';
import { gauges, histogram, quantile } from './bench-metrics.js';
import { startDaemonProcess, stopDaemonProcess } from './daemon-process.js';

const MINUTES = Number(process.argv[2] ?? 10);
const RATE = Number(process.env.CHURN_RATE ?? 40);
const TTL = process.env.CHURN_TTL ?? '2m';
const TTL_MS = Number(/^(\d+)m$/.exec(TTL)?.[1] ?? 2) * 60_000;
const READ_RATE = 100;
const SAMPLE_S = 20;
/** Flatness is judged on each figure's peak in windows of this many seconds (a sawtooth's envelope). */
const ENVELOPE_S = 300;
const MANAGEMENT = '6b1f7d0e-1111-4222-8333-944444444444';
const LAG_METRIC = 'watchword_replication_apply_lag_seconds';
/** The audit log's rotation here: 2 MiB a file, four rotated files of each kind kept (full within ten minutes). */
const AUDIT_ROTATE_BYTES = 2 * 1024 * 1024;
const AUDIT_FILES = 4;
/** Change-log entries the primary holds in memory at most (store/level-store.ts: 20,000, trimmed past 25,000). */
const LOG_TAIL_FULL = 25_000;
/**
 * Change-log entries the primary keeps on disk here (log_retention; 100,000 by default), trimmed in steps of a
 * tenth past it (replication/primary.ts): full once that many more were written.
 */
const LOG_RETENTION = 25_000;
const LOG_RETENTION_FULL = LOG_RETENTION * 1.1;
/**
 * The checks noted for dry runs reach back 8 minutes here (recent_checks_window; an hour by default), in four buckets
 * of a quarter of it: full once the first bucket has been dropped, a window and a quarter in.
 */
const RECENT_CHECKS_WINDOW_MS = 8 * 60_000;
const RECENT_CHECKS_FULL_MS = RECENT_CHECKS_WINDOW_MS * 1.25;
const HEAP_DIR = process.env.CHURN_HEAP_DIR;
const ROWS_FILE = process.env.CHURN_ROWS;
/** What each daemon's memory is made of, written with every sample to CHURN_ROWS (one JSON object a line). */
const MEMORY_GAUGES = ['nodejs_heap_size_used_bytes', 'nodejs_heap_size_total_bytes', 'nodejs_external_memory_bytes'] as const;

const mb = (b: number) => `${(b / 1024 / 1024).toFixed(0)} MB`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const du = diskUsage;
/** `f` again, a second apart, when it fails (a daemon that stood still for a heap snapshot resets connections); at most five tries. */
async function retried<T>(f: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await f();
    } catch (err) {
      if (attempt >= 5) throw err;
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

/** Uses, logouts and reads that got no answer at all (a connection refused or reset), reported at the end. */
let failedRequests = 0;
const p99Of = (xs: number[]) => (xs.length === 0 ? Number.NaN : ([...xs].sort((a, b) => a - b)[Math.floor(0.99 * (xs.length - 1))] as number));

async function api(url: string, method: string, path: string, body?: unknown, token = MANAGEMENT): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { Accept: 'application/json', ...(token ? { 'X-Consul-Token': token } : {}), ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text === '' ? undefined : JSON.parse(text) };
}

/** A jwt auth method with a static key and a rule binding a service identity; returns JWTs for it. */
async function jwtMethod(url: string, name: string, locality: 'global' | 'local'): Promise<string[]> {
  const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
  const method = await api(url, 'PUT', '/v1/acl/auth-method', {
    Name: name,
    Type: 'jwt',
    MaxTokenTTL: TTL,
    TokenLocality: locality,
    Config: { JWTValidationPubKeys: [await exportSPKI(publicKey)], JWTSupportedAlgs: ['ES256'], BoundIssuer: 'churn', ClaimMappings: { service: 'service' } },
  });
  if (method.status !== 200) throw new Error(`auth method ${name}: ${method.status} ${JSON.stringify(method.body)}`);
  const rule = await api(url, 'PUT', '/v1/acl/binding-rule', { AuthMethod: name, BindType: 'service', BindName: '${value.service}' });
  if (rule.status !== 200) throw new Error(`binding rule: ${rule.status}`);
  const jwts: string[] = [];
  for (let i = 0; i < 200; i++)
    jwts.push(
      await new SignJWT({ service: `svc-${i % 20}` })
        .setProtectedHeader({ alg: 'ES256' })
        .setIssuer('churn')
        .setIssuedAt()
        .setExpirationTime(`${MINUTES + 30}m`)
        .sign(privateKey),
    );
  return jwts;
}

/**
 * A heap snapshot of the daemon (started with --heapsnapshot-signal=SIGUSR2 and --diagnostic-dir=HEAP_DIR) into
 * HEAP_DIR/<name>.heapsnapshot. Node writes it on the daemon's main thread, so the daemon answers again once
 * the file is whole.
 */
async function heapSnapshot(daemon: { proc: { pid?: number }; url: string }, dc: string, when: string): Promise<void> {
  if (HEAP_DIR === undefined) return;
  const name = `${dc}-${when}`;
  // Each daemon writes into a directory of its own, so a snapshot is never taken for another's.
  const into = join(HEAP_DIR, dc);
  const taken = (await readdir(into)).filter((f) => f.endsWith('.heapsnapshot'));
  const t = performance.now();
  process.kill(daemon.proc.pid as number, 'SIGUSR2');
  for (;;) {
    await sleep(500);
    const made = (await readdir(into)).find((f) => f.endsWith('.heapsnapshot') && !taken.includes(f) && f.startsWith('Heap'));
    if (made !== undefined && (await fetch(`${daemon.url}/v1/agent/self`, { headers: { 'X-Consul-Token': MANAGEMENT } }).then((r) => r.ok, () => false))) {
      await rename(join(into, made), join(HEAP_DIR, `${name}.heapsnapshot`));
      process.stdout.write(`     heap snapshot ${join(HEAP_DIR, `${name}.heapsnapshot`)} (${((performance.now() - t) / 1000).toFixed(1)} s)\n`);
      return;
    }
    if (performance.now() - t > 120_000) throw new Error(`no heap snapshot ${name} within 2 minutes`);
  }
}

interface Window {
  logins: number;
  loginMs: number[];
  readMs: number[];
  failed: number;
}
const newWindow = (): Window => ({ logins: 0, loginMs: [], readMs: [], failed: 0 });

/** The churn: logins at a fixed rate, uses, logouts, and a use just after each expiry. */
class Churn {
  window = newWindow();
  afterExpiry = 0;
  probes = 0;
  logouts = 0;
  private readonly timers = new Set<NodeJS.Timeout>();
  private running = false;
  private n = 0;

  constructor(private readonly sites: Array<{ url: string; method: string; jwts: string[] }>) {}

  start(): void {
    this.running = true;
    // Ten ticks a second, each starting a tenth of the second's logins at every site.
    const tick = setInterval(() => {
      for (const site of this.sites) for (let i = 0; i < RATE / 10; i++) void this.login(site);
    }, 100);
    this.timers.add(tick);
  }

  stop(): void {
    this.running = false;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }

  private later(ms: number, f: () => Promise<void>): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      // A request that fails outright (a daemon past its connection limit while it was stopped for a
      // heap snapshot) is counted, not fatal.
      if (this.running) void f().catch(() => failedRequests++);
    }, ms);
    this.timers.add(t);
  }

  private async login(site: { url: string; method: string; jwts: string[] }): Promise<void> {
    const t = performance.now();
    const jwt = site.jwts[this.n++ % site.jwts.length];
    const r = await api(site.url, 'POST', '/v1/acl/login', { AuthMethod: site.method, BearerToken: jwt }, '').catch((err: Error) => {
      if (this.window.failed === 0) process.stderr.write(`a login failed: ${err.message}\n`);
      return undefined;
    });
    if (r?.status !== 200) {
      this.window.failed++;
      if (this.window.failed === 1 && r !== undefined) process.stderr.write(`a login failed: ${r.status} ${String(JSON.stringify(r.body)).slice(0, 200)}\n`);
      return;
    }
    this.window.logins++;
    this.window.loginMs.push(performance.now() - t);
    const token = r.body as { SecretID: string; ExpirationTime: string };
    const expires = Date.parse(token.ExpirationTime);
    const left = expires - Date.now();
    if (Math.random() < 0.25) {
      // A quarter log out before their token expires.
      this.later(Math.random() * left * 0.9, async () => {
        if ((await api(site.url, 'POST', '/v1/acl/logout', undefined, token.SecretID)).status === 200) this.logouts++;
      });
      return;
    }
    // The others use it twice during its life, and once just after it expired.
    for (const at of [Math.random() * left * 0.5, left * 0.5 + Math.random() * left * 0.45])
      this.later(at, async () => void (await api(site.url, 'GET', '/v1/acl/token/self', undefined, token.SecretID)));
    this.later(left + 200 + Math.random() * 1000, async () => {
      const sent = Date.now();
      const res = await api(site.url, 'GET', '/v1/acl/token/self', undefined, token.SecretID);
      this.probes++;
      if (res.status === 200 && sent >= expires) this.afterExpiry++;
    });
  }
}

/** Reads of long-lived tokens at a fixed rate; latencies into the current window. */
function readLoad(sites: Array<{ url: string; secrets: string[] }>, into: () => Window): () => void {
  let n = 0;
  const tick = setInterval(() => {
    for (const site of sites)
      for (let i = 0; i < READ_RATE / 10; i++) {
        const t = performance.now();
        void api(site.url, 'GET', '/v1/acl/token/self', undefined, site.secrets[n++ % site.secrets.length]).then(
          (r) => {
            if (r.status === 200) into().readMs.push(performance.now() - t);
          },
          () => failedRequests++,
        );
      }
  }, 100);
  return () => clearInterval(tick);
}

async function loginCeiling(url: string, method: string, jwt: string, pin: string | undefined): Promise<{ login: number[]; loginP99: number[]; raw: number[]; rawP99: number[] }> {
  const out = { login: [] as number[], loginP99: [] as number[], raw: [] as number[], rawP99: [] as number[] };
  for (let round = 0; round < 3; round++) {
    const r = await autocannon({
      url: `${url}/v1/acl/login`,
      method: 'POST',
      connections: 32,
      duration: 6,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ AuthMethod: method, BearerToken: jwt }),
    });
    if (r.non2xx > 0) throw new Error(`${r.non2xx} logins did not answer 200`);
    out.login.push(r.requests.average);
    out.loginP99.push(r.latency.p99);
    const { proc, firstLine } = startProcess(['scripts/bench-leveldb.ts', '6', '32'], pin);
    const raw = JSON.parse(await firstLine) as { reqPerSec: number; p99ms: number };
    await new Promise((resolve) => (proc.exitCode !== null ? resolve(undefined) : proc.once('exit', resolve)));
    out.raw.push(raw.reqPerSec);
    out.rawP99.push(raw.p99ms);
  }
  return out;
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'bench-churn-'));
  const pinned = canPin();
  const pin = pinned ? '1' : undefined;
  const common = [
    '--login-rate',
    '0',
    '--audit-log-rotate-bytes',
    String(AUDIT_ROTATE_BYTES),
    '--audit-log-rotate-max-files',
    String(AUDIT_FILES),
    '--recent-checks-window',
    `${RECENT_CHECKS_WINDOW_MS / 60_000}m`,
    '--log-retention',
    String(LOG_RETENTION),
  ];
  if (HEAP_DIR !== undefined) for (const dc of ['dc1', 'dc2']) await mkdir(join(HEAP_DIR, dc), { recursive: true });
  const snapshots = (dc: string) => (HEAP_DIR !== undefined ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${join(HEAP_DIR, dc)}`] : []);
  const dc1 = await startDaemonProcess(
    join(dir, 'dc1'),
    ['--initial-management-token', MANAGEMENT, ...common],
    undefined,
    pin,
    60_000,
    snapshots('dc1'),
  );
  const dc2 = await startDaemonProcess(
    join(dir, 'dc2'),
    ['--datacenter', 'dc2', '--primary-datacenter', 'dc1', '--primary-address', dc1.url, '--replication-token', MANAGEMENT, ...common],
    undefined,
    pin,
    60_000,
    snapshots('dc2'),
  );
  const stopReads: Array<() => void> = [];
  try {
    const globalJWTs = await jwtMethod(dc1.url, 'churn-global', 'global');
    const localJWTs = await jwtMethod(dc1.url, 'churn-local', 'local');
    const readers = async (url: string, local: boolean) => {
      const secrets: string[] = [];
      for (let i = 0; i < 50; i++) {
        const r = await api(url, 'PUT', '/v1/acl/token', { Description: 'churn reader', ...(local ? { Local: true } : {}) });
        secrets.push((r.body as { SecretID: string }).SecretID);
      }
      return secrets;
    };
    // dc2 holds the methods (and the management token) once it has replicated them.
    for (let i = 0; (await api(dc2.url, 'GET', '/v1/acl/auth-method/churn-local')).status !== 200; i++) {
      if (i > 300) throw new Error('dc2 did not replicate the auth methods within a minute');
      await sleep(200);
    }
    const sites = [
      { url: dc1.url, secrets: await readers(dc1.url, false) },
      { url: dc2.url, secrets: await readers(dc2.url, true) },
    ];
    await sleep(2_000);
    if (pinned) pinSelf('0');
    process.stdout.write(
      `churn for ${MINUTES} min: ${RATE} logins/s at dc1 (global tokens) and ${RATE}/s at dc2 (Local), MaxTokenTTL ${TTL}, a quarter logging out; ` +
        `reads ${READ_RATE}/s at each; ${pinned ? 'daemons on CPU 1, load on CPU 0' : 'not pinned'}\n`,
    );
    let window = newWindow();
    stopReads.push(readLoad(sites, () => window));
    await sleep(30_000);
    const restP99 = p99Of(window.readMs);
    process.stdout.write(`reads at rest: p99 ${restP99.toFixed(1)} ms\n`);
    const lagBefore = await histogram(dc2.url, LAG_METRIC, MANAGEMENT);
    const churn = new Churn([
      { url: dc1.url, method: 'churn-global', jwts: globalJWTs },
      { url: dc2.url, method: 'churn-local', jwts: localJWTs },
    ]);
    window = churn.window = newWindow();
    churn.start();
    const started = Date.now();
    const indexOf = async (url: string) => ((await api(url, 'GET', '/v1/internal/index')).body as { Index: number }).Index;
    const startIndex = await indexOf(dc1.url);
    // When each bounded part is full: its growth is over from then on, and flatness is judged after the last.
    const full: Record<string, number | undefined> = {
      'change-log tail': undefined,
      'change log on disk': undefined,
      'audit log': undefined,
      'recent checks': undefined,
      'token garbage dc1': undefined,
      'token garbage dc2': undefined,
    };
    const rows: Array<{ t: number; rss1: number; rss2: number; disk1: number; disk2: number; audit1: number; live1: number; live2: number }> = [];
    let firstSnapshot = false;
    process.stdout.write('   t | logins/s | login p99 | read p99 (× rest) | live dc1 | live dc2 | RSS dc1 | RSS dc2 | LevelDB dc1 | LevelDB dc2 | audit dc1\n');
    while (Date.now() - started < MINUTES * 60_000) {
      await sleep(SAMPLE_S * 1000);
      const w = churn.window;
      window = churn.window = newWindow();
      const stats = (url: string) =>
        retried(async () => ((await api(url, 'GET', '/v1/agent/self')).body as { Stats: { Tokens: number; TokenCompactions?: number } }).Stats);
      const [stats1, stats2] = [await stats(dc1.url), await stats(dc2.url)];
      const row = {
        t: (Date.now() - started) / 1000,
        rss1: (await memoryOf(dc1.proc.pid as number)).now,
        rss2: (await memoryOf(dc2.proc.pid as number)).now,
        disk1: du(join(dir, 'dc1', 'store')),
        disk2: du(join(dir, 'dc2', 'store')),
        audit1: du(join(dir, 'dc1', 'audit')),
        live1: stats1.Tokens,
        live2: stats2.Tokens,
      };
      rows.push(row);
      if (ROWS_FILE !== undefined) {
        const memory = (url: string) => retried(() => gauges(url, MEMORY_GAUGES, MANAGEMENT));
        appendFileSync(ROWS_FILE, `${JSON.stringify({ ...row, dc1: await memory(dc1.url), dc2: await memory(dc2.url) })}\n`);
      }
      const written = (await retried(() => indexOf(dc1.url))) - startIndex;
      const nowFull = {
        'change-log tail': written >= LOG_TAIL_FULL,
        'change log on disk': written >= LOG_RETENTION_FULL,
        'audit log': readdirSync(join(dir, 'dc1', 'audit')).some((f) => f.endsWith(`.log.${AUDIT_FILES}`)),
        'recent checks': Date.now() - started >= RECENT_CHECKS_FULL_MS,
        // Replaced and deleted tokens' bytes grow until first reclaimed (4 MiB here: docs/operations.md).
        'token garbage dc1': (stats1.TokenCompactions ?? 0) > 0,
        'token garbage dc2': (stats2.TokenCompactions ?? 0) > 0,
      };
      for (const [part, isFull] of Object.entries(nowFull))
        if (isFull && full[part] === undefined) {
          full[part] = row.t;
          process.stdout.write(`     ${part} full at t = ${row.t.toFixed(0)} s\n`);
        }
      const readP99 = p99Of(w.readMs);
      process.stdout.write(
        `${row.t.toFixed(0).padStart(4)} | ${(w.logins / SAMPLE_S).toFixed(0).padStart(8)} | ${p99Of(w.loginMs).toFixed(1).padStart(6)} ms | ` +
          `${readP99.toFixed(1).padStart(6)} ms (${(readP99 / restP99).toFixed(2)}×) | ${String(row.live1).padStart(8)} | ${String(row.live2).padStart(8)} | ` +
          `${mb(row.rss1).padStart(7)} | ${mb(row.rss2).padStart(7)} | ${mb(row.disk1).padStart(11)} | ${mb(row.disk2).padStart(11)} | ${mb(row.audit1).padStart(9)}` +
          `${w.failed > 0 ? ` (${w.failed} logins failed)` : ''}\n`,
      );
      if (!firstSnapshot && row.t >= TTL_MS / 1000 + 30) {
        firstSnapshot = true;
        await heapSnapshot(dc1, 'dc1', 'first-ttl');
        await heapSnapshot(dc2, 'dc2', 'first-ttl');
      }
    }
    await heapSnapshot(dc1, 'dc1', 'end');
    await heapSnapshot(dc2, 'dc2', 'end');
    churn.stop();
    for (const s of stopReads.splice(0)) s();
    const lagAfter = await histogram(dc2.url, LAG_METRIC, MANAGEMENT);
    const lag = lagAfter.map(([le, n], i) => [le, n - (lagBefore[i]?.[1] ?? 0)] as [number, number]);
    // Flat once the bounded parts this run filled are full (and after the first MaxTokenTTL and a reap
    // interval): the spread of each figure over the rest of the run. A part not full by the end is named.
    const notFull = Object.entries(full)
      .filter(([, t]) => t === undefined)
      .map(([part]) => part);
    const from = Math.max(TTL_MS / 1000 + 30, ...Object.values(full).map((t) => t ?? 0));
    const steady = rows.filter((r) => r.t >= from);
    process.stdout.write(
      `bounded parts full by t = ${from.toFixed(0)} s${notFull.length > 0 ? `; not full by the end: ${notFull.join(', ')}` : ''}\n`,
    );
    // Each figure's spread (max/min) over the samples, and over its peaks in windows of ENVELOPE_S: LevelDB's size
    // is a sawtooth (deletes take room until a compaction drops them), and so is a heap between collections; a
    // sawtooth whose peaks stay level is flat, one whose peaks climb is growth. Judged on the peaks.
    const spread = (f: (r: (typeof rows)[number]) => number) => {
      const xs = steady.map(f);
      const peaks: number[] = [];
      for (const r of steady) {
        const w = Math.floor((r.t - from) / ENVELOPE_S);
        peaks[w] = Math.max(peaks[w] ?? 0, f(r));
      }
      // A last window shorter than half of one is not a window's peak.
      const last = steady[steady.length - 1];
      if (last !== undefined && (last.t - from) % ENVELOPE_S < ENVELOPE_S / 2 && peaks.length > 2) peaks.pop();
      const ps = peaks.filter((x) => x !== undefined);
      return xs.length === 0 ? { samples: Number.NaN, peaks: Number.NaN } : { samples: Math.max(...xs) / Math.min(...xs), peaks: Math.max(...ps) / Math.min(...ps) };
    };
    const spreads = {
      'RSS dc1': spread((r) => r.rss1),
      'RSS dc2': spread((r) => r.rss2),
      'LevelDB dc1': spread((r) => r.disk1),
      'LevelDB dc2': spread((r) => r.disk2),
      'audit log dc1': spread((r) => r.audit1),
    };
    const flat = Object.fromEntries(Object.entries(spreads).map(([k, v]) => [k, v.peaks]));
    process.stdout.write(
      `replication lag at dc2: p50 ${(quantile(lag, 0.5) * 1000).toFixed(1)} ms, p99 ${(quantile(lag, 0.99) * 1000).toFixed(1)} ms over ${lag[lag.length - 1]?.[1] ?? 0} batches\n` +
        `tokens that authenticated after their ExpirationTime: ${churn.afterExpiry} of ${churn.probes} probed just after expiry; ${churn.logouts} logouts; ${failedRequests} requests got no answer\n` +
        `once the bounded parts were full (${steady.length} samples), max/min of the samples and of the ${ENVELOPE_S / 60}-minute peaks: ${Object.entries(
          spreads,
        )
          .map(([k, v]) => `${k} ${v.samples.toFixed(3)} / ${v.peaks.toFixed(3)}`)
          .join(', ')}\n`,
    );
    const ceiling = await loginCeiling(dc1.url, 'churn-global', globalJWTs[0] as string, pin);
    const loginRate = medianOf(ceiling.login);
    const rawRate = medianOf(ceiling.raw);
    process.stdout.write(
      `login ceiling: ${loginRate.toFixed(0)} logins/s (p99 ${medianOf(ceiling.loginP99).toFixed(1)} ms) against raw LevelDB synced puts ` +
        `${rawRate.toFixed(0)}/s (p99 ${medianOf(ceiling.rawP99).toFixed(1)} ms): ${(loginRate / rawRate).toFixed(2)}×, p99 ` +
        `${(medianOf(ceiling.loginP99) / medianOf(ceiling.rawP99)).toFixed(2)}× (goal ≥ 0.5×, ≤ 3×)\n`,
    );
    // Flatness is judged over at least two windows after every bounded part is full, or not at all.
    const judged = notFull.length === 0 && steady.length > 0 && (steady[steady.length - 1] as (typeof rows)[number]).t - from >= 2 * ENVELOPE_S;
    const misses = [
      churn.afterExpiry > 0 ? `${churn.afterExpiry} tokens authenticated after their ExpirationTime` : '',
      judged
        ? ''
        : `flatness not judged: ${notFull.length > 0 ? `${notFull.join(', ')} not full by the end` : `less than ${(2 * ENVELOPE_S) / 60} minutes after the bounded parts were full`} (run longer)`,
      ...Object.entries(flat).map(([k, v]) =>
        judged && !(v <= 1.1) ? `${k} not flat once the bounded parts were full (max/min of its peaks ${v.toFixed(3)})` : '',
      ),
    ].filter(Boolean);
    for (const m of misses) process.stdout.write(`MISSED: ${m}\n`);
    process.exitCode = misses.length > 0 ? 1 : 0;
  } finally {
    for (const s of stopReads) s();
    if (pinned) unpinSelf();
    await stopDaemonProcess(dc2.proc);
    await stopDaemonProcess(dc1.proc);
    if (process.env.BENCH_KEEP) process.stdout.write(`data dir kept: ${dir}\n`);
    else await rm(dir, { recursive: true, force: true });
  }
}

await main();
