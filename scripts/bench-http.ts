/**
 * The HTTP figures of docs/development.md, "Development" in one run: token read, self, `?expanded` and the policy
 * filter against a bare Fastify route and a bare node:http route (the runtime's ceiling), and
 * the durable writes (create, delete, a login through a jwt method) against raw LevelDB's
 * synced puts.
 * The servers under test (the daemon on the seeded data dir, the bare route, the LevelDB
 * loop) run on one core (taskset -c 1) and the load generator (this process) on the other
 * (taskset -c 0); each round runs every scenario in turn, and the median of the rounds is
 * compared. Besides req/s and p99, each HTTP row carries the server's CPU time per request
 * (user + system, all threads, from /proc), so that where the time goes is told apart from
 * how busy the machine is. Without taskset (or with one core) nothing is pinned, and it says so.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { SignJWT, exportSPKI, generateKeyPair } from 'jose';
import { medianOf, pinSelf, startDaemonAndBaseline, startProcess, stopProcess, unpinSelf } from './bench-process.js';

export interface HttpRow {
  reqPerSec: number;
  p50ms: number;
  p99ms: number;
  /** Server CPU time per request, µs (HTTP rows only). */
  cpuMicros?: number;
}

export interface HttpBench {
  bare: HttpRow;
  /** The bare node:http route. */
  node: HttpRow;
  /** A bare node:http route answering the very bytes of the token read (status, headers, body). */
  same: HttpRow;
  read: HttpRow;
  self: HttpRow;
  expanded: HttpRow;
  filter: HttpRow;
  raw: HttpRow;
  create: HttpRow;
  delete: HttpRow;
  login: HttpRow;
  pinned: boolean;
  rounds: number;
  /** Every round of every scenario, for the record. */
  all: Record<string, HttpRow[]>;
}

export interface HttpBenchOptions {
  seconds: number;
  rounds: number;
  connections: number;
  /** Policies each linked by 10 of the seeded tokens: the filter scenario asks for a different one each time. */
  filterPolicies: string[];
  /** Seeded tokens the delete scenario may delete (none of them linked to a filter policy). */
  deletable: string[];
  /** Scenarios to run (default all): for work on one path. */
  only?: Set<string>;
}

const TICKS_PER_SECOND = 100;

/** User + system CPU time of a process so far, µs (Linux; undefined elsewhere). */
export async function cpuMicros(pid: number | undefined): Promise<number | undefined> {
  if (pid === undefined) return undefined;
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // The fields after the command name (in parentheses, may hold spaces): utime and stime are the 12th and 13th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1_000_000) / TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

/**
 * Waits until none of `pids` uses more than 2% of a CPU over 200 ms (LevelDB compacting after a
 * write-heavy round, a collection), at most `maxMs`: each measurement then starts from a quiet
 * machine, not in the wake of the one before it.
 */
export async function settle(pids: Array<number | undefined>, maxMs = 10_000): Promise<void> {
  const until = Date.now() + maxMs;
  const total = async () => {
    let sum = 0;
    for (const pid of pids) sum += (await cpuMicros(pid)) ?? 0;
    return sum;
  };
  let before = await total();
  while (Date.now() < until) {
    await new Promise((r) => setTimeout(r, 200));
    const now = await total();
    if (now - before < 4_000) return;
    before = now;
  }
}

/** Deletes a round asks for: a fixed count (the seeded tokens to delete are finite), its rate taken from the time it took. */
const DELETES_PER_ROUND = 25_000;
/** Deletes of the warm-up before the rounds (the other scenarios warm up for 2 s). */
const DELETES_TO_WARM_UP = 5_000;

/**
 * A jwt auth method with a static RS256 key (as a Kubernetes cluster's service account tokens
 * and most identity providers sign) and a rule binding a service identity, at the daemon; the
 * body of a login with a JWT it accepts.
 */
export async function loginBody(url: string, headers: Record<string, string>): Promise<string> {
  const { publicKey, privateKey } = await generateKeyPair('RS256', { extractable: true });
  const put = async (path: string, body: unknown) => {
    const r = await fetch(`${url}${path}`, { method: 'PUT', headers: { ...headers, 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    if (!r.ok) throw new Error(`PUT ${path}: ${r.status} ${await r.text()}`);
  };
  await put('/v1/acl/auth-method', {
    Name: 'bench-jwt',
    Type: 'jwt',
    Config: { JWTValidationPubKeys: [await exportSPKI(publicKey)], JWTSupportedAlgs: ['RS256'], BoundIssuer: 'bench', ClaimMappings: { service: 'service' } },
  });
  await put('/v1/acl/binding-rule', { AuthMethod: 'bench-jwt', BindType: 'service', BindName: '${value.service}' });
  const jwt = await new SignJWT({ service: 'web' }).setProtectedHeader({ alg: 'RS256' }).setIssuer('bench').setIssuedAt().setExpirationTime('2h').sign(privateKey);
  return JSON.stringify({ AuthMethod: 'bench-jwt', BearerToken: jwt });
}

/** `dataDir` holds a seeded store (not in use) whose management token is `secret`. */
export async function httpBench(dataDir: string, secret: string, options: HttpBenchOptions): Promise<HttpBench> {
  // Logins as fast as they come: the per-client login rate limit is not what is measured.
  const { pinned, pin, daemon, bareURL, baselinePid, nodeURL, nodePid, stop } = await startDaemonAndBaseline(dataDir, ['--login-rate', '0']);
  let stopSame = async (): Promise<void> => undefined;
  try {
    const headers = { 'X-Service-Token': secret };
    const login = await loginBody(daemon.url, headers);
    const self = (await (await fetch(`${daemon.url}/v1/acl/token/self`, { headers })).json()) as { AccessorID: string };
    const check = (await (await fetch(`${daemon.url}/v1/acl/tokens?policy=${options.filterPolicies[7]}`, { headers })).json()) as unknown[];
    if (check.length !== 10) throw new Error(`expected 10 tokens for the policy filter, got ${check.length}`);
    const same = await sameBytesRoute(`${daemon.url}/v1/acl/token/${self.AccessorID}`, headers, pin);
    stopSame = same.stop;
    if (pinned) pinSelf('0');

    let next = 0;
    const scenarios: Record<string, { pid: number | undefined; opts: autocannon.Options }> = {
      bare: { pid: baselinePid, opts: { url: bareURL } },
      node: { pid: nodePid, opts: { url: nodeURL } },
      same: { pid: same.pid, opts: { url: same.url } },
      read: { pid: daemon.proc.pid, opts: { url: `${daemon.url}/v1/acl/token/${self.AccessorID}`, headers } },
      self: { pid: daemon.proc.pid, opts: { url: `${daemon.url}/v1/acl/token/self`, headers } },
      expanded: { pid: daemon.proc.pid, opts: { url: `${daemon.url}/v1/acl/token/${self.AccessorID}?expanded`, headers } },
      filter: {
        pid: daemon.proc.pid,
        opts: {
          url: daemon.url,
          headers,
          requests: [{ method: 'GET', setupRequest: (req) => ({ ...req, path: `/v1/acl/tokens?policy=${options.filterPolicies[next++ % options.filterPolicies.length]}` }) }],
        },
      },
      create: { pid: daemon.proc.pid, opts: { url: `${daemon.url}/v1/acl/token`, method: 'PUT', headers: { ...headers, 'Content-Type': 'application/json' }, body: '{"Description":"bench"}' } },
      // Each delete a different seeded token, DELETES_PER_ROUND of them a round.
      delete: {
        pid: daemon.proc.pid,
        opts: {
          url: daemon.url,
          headers,
          amount: DELETES_PER_ROUND,
          requests: [{ method: 'DELETE', setupRequest: (req) => ({ ...req, path: `/v1/acl/token/${options.deletable[deleted++]}` }) }],
        },
      },
      login: { pid: daemon.proc.pid, opts: { url: `${daemon.url}/v1/acl/login`, method: 'POST', headers: { 'Content-Type': 'application/json' }, body: login } },
    };
    let deleted = 0;
    const wanted = (name: string) => name === 'bare' || name === 'node' || name === 'same' || options.only === undefined || options.only.has(name);
    const run = async (name: string, seconds: number, amount?: number): Promise<HttpRow> => {
      const given = scenarios[name] as (typeof scenarios)[string];
      const s = amount === undefined ? given : { ...given, opts: { ...given.opts, amount } };
      const before = await cpuMicros(s.pid);
      const started = performance.now();
      // Without a callback autocannon returns its run's event emitter, made thenable (lib/init.js).
      const instance = autocannon({ connections: options.connections, duration: seconds, ...s.opts }) as unknown as Promise<autocannon.Result> & {
        on(event: 'response', listener: () => void): void;
      };
      // A counted round ends at autocannon's next one-second tick after its last answer: timed to that answer.
      let lastAnswer = started;
      if (s.opts.amount !== undefined)
        instance.on('response', () => {
          lastAnswer = performance.now();
        });
      const r = await instance;
      const tookS = (lastAnswer - started) / 1000;
      const after = await cpuMicros(s.pid);
      if (r.non2xx > 0 || r.errors > 0 || r.timeouts > 0) throw new Error(`${name}: ${r.non2xx} non-2xx answers, ${r.errors} errors, ${r.timeouts} timeouts`);
      return {
        // A round of a fixed count (deletes): the count over the time to its last answer (autocannon's
        // own duration, and its end, go by whole seconds of its ticks).
        reqPerSec: Math.round(s.opts.amount !== undefined ? r.requests.total / tookS : r.requests.average),
        p50ms: r.latency.p50,
        p99ms: r.latency.p99,
        ...(before !== undefined && after !== undefined && r.requests.total > 0 ? { cpuMicros: Math.round((after - before) / r.requests.total) } : {}),
      };
    };
    const rawRound = async (): Promise<HttpRow> => {
      const { proc, firstLine } = startProcess(['scripts/bench-leveldb.ts', String(options.seconds), '32'], pin);
      const r = JSON.parse(await firstLine) as { reqPerSec: number; p50ms: number; p99ms: number };
      await new Promise((resolve) => (proc.exitCode !== null ? resolve(undefined) : proc.once('exit', resolve)));
      return { reqPerSec: r.reqPerSec, p50ms: Math.round(r.p50ms * 100) / 100, p99ms: Math.round(r.p99ms * 100) / 100 };
    };

    // Warm up: compiled code on both sides, and the store's compaction after the seeding.
    const reads = ['bare', 'node', 'same', 'read', 'self', 'expanded', 'filter'];
    for (const name of reads) if (wanted(name)) await run(name, 2);
    const rounds = Math.max(3, options.rounds);
    const deletes = DELETES_TO_WARM_UP + rounds * DELETES_PER_ROUND;
    if (wanted('delete') && options.deletable.length < deletes)
      throw new Error(`the delete scenario needs ${deletes} seeded tokens to delete, got ${options.deletable.length}`);
    const all: Record<string, HttpRow[]> = {};
    const push = (name: string, row: HttpRow) => (all[name] ??= []).push(row);
    for (let i = 0; i < rounds; i++) {
      for (const name of reads) if (wanted(name)) push(name, await run(name, options.seconds));
    }
    // Writes last: they change the store the reads above were measured on. Each round of
    // them starts with raw LevelDB's, and each write scenario starts warm, as the reads do.
    const writes = ['create', 'delete', 'login'].filter(wanted);
    if (writes.length > 0) {
      for (const name of writes) await (name === 'delete' ? run(name, 2, DELETES_TO_WARM_UP) : run(name, 2));
      for (let i = 0; i < rounds; i++) {
        push('raw', await rawRound());
        for (const name of writes) {
          await settle([daemon.proc.pid]);
          push(name, await run(name, options.seconds));
        }
      }
    }
    const med = (name: string): HttpRow => {
      const xs = all[name] ?? [];
      if (xs.length === 0) return { reqPerSec: Number.NaN, p50ms: Number.NaN, p99ms: Number.NaN };
      const cpu = xs.flatMap((x) => (x.cpuMicros === undefined ? [] : [x.cpuMicros]));
      return { reqPerSec: medianOf(xs.map((x) => x.reqPerSec)), p50ms: medianOf(xs.map((x) => x.p50ms)), p99ms: medianOf(xs.map((x) => x.p99ms)), ...(cpu.length > 0 ? { cpuMicros: medianOf(cpu) } : {}) };
    };
    return {
      bare: med('bare'),
      node: med('node'),
      same: med('same'),
      read: med('read'),
      self: med('self'),
      expanded: med('expanded'),
      filter: med('filter'),
      raw: med('raw'),
      create: med('create'),
      delete: med('delete'),
      login: med('login'),
      pinned,
      rounds,
      all,
    };
  } finally {
    if (pinned) unpinSelf();
    await stopSame();
    await stop();
  }
}

/**
 * The ceiling of a read: a bare node:http route, pinned as the daemon is, answering the status,
 * headers and body the daemon answered `url` with (node's own date and keep-alive headers aside,
 * which it adds to every answer).
 */
async function sameBytesRoute(url: string, headers: Record<string, string>, pin: string | undefined): Promise<{ url: string; pid: number | undefined; stop(): Promise<void> }> {
  const answer = await new Promise<{ status: number; headers: Record<string, string>; body: string }>((resolve, reject) => {
    const req = request(url, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const kept: Record<string, string> = {};
        const raw = res.rawHeaders;
        for (let i = 0; i < raw.length; i += 2) {
          const name = raw[i] as string;
          if (!/^(date|connection|keep-alive|transfer-encoding)$/i.test(name)) kept[name] = raw[i + 1] as string;
        }
        resolve({ status: res.statusCode ?? 0, headers: kept, body: Buffer.concat(chunks).toString('utf8') });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
  if (answer.status !== 200) throw new Error(`the read to copy answered ${answer.status}`);
  const dir = await mkdtemp(join(tmpdir(), 'bench-same-'));
  const file = join(dir, 'answer.json');
  await writeFile(file, JSON.stringify(answer));
  const { proc, firstLine } = startProcess(['scripts/bench-baseline.ts', 'same', file], pin);
  const port = await firstLine;
  return {
    url: `http://127.0.0.1:${port}/v1/acl/token/same`,
    pid: proc.pid,
    stop: async () => {
      await stopProcess(proc);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A floor of docs/development.md, "Development" beside its figure. */
export interface FloorRow {
  scenario: string;
  'req/s': number;
  'p99 ms': number;
  'CPU µs/req'?: number;
  figure: string;
  floor: string;
  ok: boolean | '';
}

/** The table of the HTTP figures, each floor beside the ratio it is judged on. */
export function httpFloors(r: HttpBench, tokens: number): FloorRow[] {
  const x = (a: number, b: number) => `${(a / b).toFixed(2)}x`;
  const row = (scenario: string, v: HttpRow, figure: string, floor: string, ok: boolean | ''): FloorRow => ({
    scenario,
    'req/s': v.reqPerSec,
    'p99 ms': v.p99ms,
    ...(v.cpuMicros !== undefined ? { 'CPU µs/req': v.cpuMicros } : {}),
    figure,
    floor,
    ok,
  });
  const rows: FloorRow[] = [
    row('bare node:http route, constant token JSON', r.node, '1.00x', 'baseline', ''),
    row('bare Fastify route, constant token JSON', r.bare, x(r.bare.reqPerSec, r.node.reqPerSec), 'baseline', ''),
  ];
  const ran = (v: HttpRow) => Number.isFinite(v.reqPerSec);
  // Reads against the runtime's ceiling (node:http), and as before against Fastify's.
  if (ran(r.same)) rows.push(row("bare node:http route, the token read's own bytes", r.same, x(r.same.reqPerSec, r.node.reqPerSec), 'ceiling of reads', ''));
  // Reads against the runtime's ceiling for their own bytes (node:http answering them), the plain node:http and Fastify routes beside.
  const read = (scenario: string, v: HttpRow, floor: number) =>
    rows.push(
      row(
        scenario,
        v,
        `${x(v.reqPerSec, r.same.reqPerSec)} same bytes, ${x(v.reqPerSec, r.node.reqPerSec)} node, ${x(v.reqPerSec, r.bare.reqPerSec)} Fastify`,
        `>= ${floor.toFixed(2)}x same bytes`,
        v.reqPerSec >= floor * r.same.reqPerSec,
      ),
    );
  if (ran(r.read)) {
    read('token read by accessor', r.read, 0.95);
    if (r.read.cpuMicros !== undefined && r.node.cpuMicros !== undefined) {
      rows.push(row('  server CPU per read vs per bare node:http request', r.read, `${(r.read.cpuMicros / r.node.cpuMicros).toFixed(2)}x`, '', ''));
    }
    if (r.read.cpuMicros !== undefined && r.same.cpuMicros !== undefined)
      rows.push(row('  server CPU per read vs per same-bytes request', r.read, `${(r.read.cpuMicros / r.same.cpuMicros).toFixed(2)}x`, '', ''));
  }
  if (ran(r.self)) read('token self', r.self, 0.95);
  if (ran(r.expanded)) rows.push(row('token read ?expanded', r.expanded, `${x(r.expanded.reqPerSec, r.node.reqPerSec)} node, ${x(r.expanded.reqPerSec, r.bare.reqPerSec)} Fastify`, '>= 0.30x Fastify', r.expanded.reqPerSec >= 0.3 * r.bare.reqPerSec));
  if (ran(r.filter) && ran(r.read)) {
    rows.push(
      row(
        `tokens?policy=X (10 of ${tokens}, a different X each time)`,
        r.filter,
        `${x(r.filter.reqPerSec, r.read.reqPerSec)} read, p99 ${x(r.filter.p99ms, r.read.p99ms)}`,
        '>= 0.50x read, p99 <= 2.00x read',
        r.filter.reqPerSec >= 0.5 * r.read.reqPerSec && r.filter.p99ms <= 2 * r.read.p99ms,
      ),
    );
  }
  if (ran(r.raw)) rows.push(row('raw LevelDB, 32 writers, synced put', r.raw, '1.00x', 'baseline', ''));
  const write = (scenario: string, v: HttpRow, floor: number, p99: number) => {
    if (!ran(v)) return;
    rows.push(
      row(
        scenario,
        v,
        `${x(v.reqPerSec, r.raw.reqPerSec)} raw, p99 ${x(v.p99ms, r.raw.p99ms)}`,
        `>= ${floor.toFixed(2)}x raw, p99 <= ${p99.toFixed(2)}x raw`,
        v.reqPerSec >= floor * r.raw.reqPerSec && v.p99ms <= p99 * r.raw.p99ms,
      ),
    );
  };
  write('token create (fsync, group commit)', r.create, 0.8, 2);
  write('token delete (fsync, group commit)', r.delete, 0.8, 2);
  write('login through a jwt method (RS256)', r.login, 0.5, 3);
  return rows;
}
