/**
 * BENCH_ONLY=ab BENCH_AB=<commit> npm run bench: this build against the build of another commit
 * (the "before" of a change), interleaved in one run: each on its own copy of the seeded store,
 * both on CPU 1 and the load on CPU 0, and each round runs every hot path on one then the other
 * (the order alternating by round), so that the machine's drift falls on both alike. The ratio
 * of each path is this build's median over the other's; a change holds the hot paths when each
 * is at least AB_FLOOR.
 */
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { buildCommit, commitOf } from './commit-build.js';
import { type DaemonProcess, startDaemonProcess, stopDaemonProcess, useBuiltDaemon } from './daemon-process.js';
import { type HttpRow, cpuMicros, loginBody, settle } from './bench-http.js';
import { canPin, medianOf, pinSelf } from './bench-process.js';

/** What each hot path of this build must reach of the other's. */
export const AB_FLOOR = 0.97;

/** The hot paths compared: reads first (the writes change the stores). */
const PATHS = ['read', 'self', 'filter', 'create', 'login'] as const;
type Path = (typeof PATHS)[number];
const WRITES: ReadonlySet<Path> = new Set(['create', 'login']);

export interface AbRow {
  path: Path;
  before: HttpRow;
  after: HttpRow;
  ratio: number;
  ok: boolean;
}

export interface AbBench {
  commit: string;
  rounds: number;
  pinned: boolean;
  rows: AbRow[];
}

interface Side {
  name: 'before' | 'after';
  daemon: DaemonProcess;
  dir: string;
  requests: Record<Path, autocannon.Options>;
}

/** Starts the daemon built at `entry` (undefined: this build) on `dir`, pinned to `pin`. */
async function startSide(entry: string | undefined, dir: string, pin: string | undefined): Promise<DaemonProcess> {
  const own = process.env.WATCHWORD_AGENT_ENTRY;
  if (entry !== undefined) process.env.WATCHWORD_AGENT_ENTRY = entry;
  try {
    return await startDaemonProcess(dir, ['--login-rate', '0', '--http-max-conns-per-client', '0'], undefined, pin, 120_000);
  } finally {
    if (own === undefined) delete process.env.WATCHWORD_AGENT_ENTRY;
    else process.env.WATCHWORD_AGENT_ENTRY = own;
  }
}

async function requestsOf(url: string, secret: string, filterPolicies: string[]): Promise<Record<Path, autocannon.Options>> {
  const headers = { 'X-Service-Token': secret };
  const self = (await (await fetch(`${url}/v1/acl/token/self`, { headers })).json()) as { AccessorID: string };
  const login = await loginBody(url, headers);
  let next = 0;
  return {
    read: { url: `${url}/v1/acl/token/${self.AccessorID}`, headers },
    self: { url: `${url}/v1/acl/token/self`, headers },
    filter: {
      url,
      headers,
      requests: [{ method: 'GET', setupRequest: (req) => ({ ...req, path: `/v1/acl/tokens?policy=${filterPolicies[next++ % filterPolicies.length]}` }) }],
    },
    create: { url: `${url}/v1/acl/token`, method: 'PUT', headers: { ...headers, 'Content-Type': 'application/json' }, body: '{"Description":"bench"}' },
    login: { url: `${url}/v1/acl/login`, method: 'POST', headers: { 'Content-Type': 'application/json' }, body: login },
  };
}

/** One round of a path at one daemon: its rate, latency and the daemon's CPU per request. */
async function measure(opts: autocannon.Options, seconds: number, connections: number, pid?: number): Promise<HttpRow> {
  const before = await cpuMicros(pid);
  const r = await (autocannon({ connections, duration: seconds, ...opts }) as unknown as Promise<autocannon.Result>);
  const after = await cpuMicros(pid);
  if (r.non2xx > 0 || r.errors > 0 || r.timeouts > 0) throw new Error(`${opts.url}: ${r.non2xx} non-2xx answers, ${r.errors} errors, ${r.timeouts} timeouts`);
  return {
    reqPerSec: Math.round(r.requests.average),
    p50ms: r.latency.p50,
    p99ms: r.latency.p99,
    ...(before !== undefined && after !== undefined && r.requests.total > 0 ? { cpuMicros: Math.round((after - before) / r.requests.total) } : {}),
  };
}

/** The interleaved comparison on copies of the seeded store in `dataDir` (not in use), whose management token is `secret`. */
export async function abBench(
  dataDir: string,
  secret: string,
  rev: string,
  options: { seconds: number; rounds: number; connections: number; filterPolicies: string[]; only?: ReadonlySet<string> },
): Promise<AbBench> {
  const paths = PATHS.filter((p) => options.only === undefined || options.only.has(p));
  const commit = commitOf(rev);
  useBuiltDaemon();
  const entry = buildCommit(commit, join('/var/tmp', `watchword-build-${commit.slice(0, 12)}`), `watchword at ${commit.slice(0, 12)}`);
  const pinned = canPin();
  const pin = pinned ? '1' : undefined;
  const sides: Side[] = [];
  const scratch = await mkdtemp(join(tmpdir(), 'watchword-ab-'));
  try {
    for (const [name, which] of [
      ['before', entry],
      ['after', undefined],
    ] as const) {
      const dir = join(scratch, name);
      await cp(dataDir, dir, { recursive: true });
      const daemon = await startSide(which, dir, pin);
      sides.push({ name, daemon, dir, requests: await requestsOf(daemon.url, secret, options.filterPolicies) });
    }
    if (pinned) pinSelf('0');
    const all = new Map<string, HttpRow[]>();
    const rounds = Math.max(3, options.rounds);
    for (const group of [paths.filter((p) => !WRITES.has(p)), paths.filter((p) => WRITES.has(p))]) {
      // Warm: compiled code on both.
      for (const path of group) for (const side of sides) await measure(side.requests[path], 2, options.connections);
      for (let i = 0; i < rounds; i++) {
        const order = i % 2 === 0 ? sides : [...sides].reverse();
        for (const path of group)
          for (const side of order) {
            await settle(sides.map((s) => s.daemon.proc.pid));
            const row = await measure(side.requests[path], options.seconds, options.connections, side.daemon.proc.pid);
            const key = `${side.name}:${path}`;
            all.set(key, [...(all.get(key) ?? []), row]);
          }
      }
    }
    const med = (key: string): HttpRow => {
      const xs = all.get(key) ?? [];
      const cpu = xs.flatMap((x) => (x.cpuMicros === undefined ? [] : [x.cpuMicros]));
      return {
        reqPerSec: medianOf(xs.map((x) => x.reqPerSec)),
        p50ms: medianOf(xs.map((x) => x.p50ms)),
        p99ms: medianOf(xs.map((x) => x.p99ms)),
        ...(cpu.length > 0 ? { cpuMicros: medianOf(cpu) } : {}),
      };
    };
    const rows = paths.map((path): AbRow => {
      const before = med(`before:${path}`);
      const after = med(`after:${path}`);
      const ratio = after.reqPerSec / before.reqPerSec;
      return { path, before, after, ratio, ok: ratio >= AB_FLOOR };
    });
    return { commit, rounds, pinned, rows };
  } finally {
    for (const s of sides) await stopDaemonProcess(s.daemon.proc);
    await rm(scratch, { recursive: true, force: true });
  }
}

/** The comparison as a table. */
export function abTable(r: AbBench): Array<Record<string, string | number | boolean>> {
  return r.rows.map((row) => ({
    path: row.path,
    [`before ${r.commit.slice(0, 7)} req/s`]: row.before.reqPerSec,
    'after req/s': row.after.reqPerSec,
    'before p99 ms': row.before.p99ms,
    'after p99 ms': row.after.p99ms,
    'CPU µs/req before/after': `${row.before.cpuMicros ?? '?'}/${row.after.cpuMicros ?? '?'}`,
    ratio: `${row.ratio.toFixed(3)}x`,
    target: `>= ${AB_FLOOR}x`,
    ok: row.ok,
  }));
}
