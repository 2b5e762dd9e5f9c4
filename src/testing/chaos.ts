/**
 * The fault-injection run behind `npm run chaos` and its short form in the tests:
 * three datacenters from watchword/testing (links through cuttable proxies), a
 * continuous mixed load, and faults in rotation. After each fault the load pauses
 * until every datacenter holds the primary's global objects ({ID: Hash}); at the end
 * every acknowledged write is checked. Every loop is bounded in count and time.
 */
import { randomUUID } from 'node:crypto';
import { jsonCall } from './http.js';
import { type Anomaly, HistoryRecorder, type Operation } from './history.js';
import { type Cluster, startCluster } from './index.js';

export type FaultKind = 'kill-primary' | 'kill-secondary' | 'freeze-secondary' | 'cut-link';

export interface FaultResult {
  n: number;
  kind: FaultKind;
  target: string;
  heldMs: number;
  /** From undoing the fault until every datacenter converged. */
  convergedMs: number;
  converged: boolean;
}

export interface ChaosReport {
  faults: FaultResult[];
  durationMs: number;
  medianConvergenceMs: number;
  writes: { acknowledged: number; ambiguous: number; deletes: number };
  /** Acknowledged writes not found at the end (must be empty). */
  lost: string[];
  /** Tokens whose delete was acknowledged but that are still there (must be empty). */
  resurrected: string[];
  /** Local tokens seen outside their datacenter (must be empty). */
  leaked: string[];
  /** Answers that break the rules: 5xx other than 503, and unexpected 4xx (must be empty). */
  bad: string[];
  /** What readers saw, checked (src/testing/history.ts). */
  history: { operations: number; anomalies: Anomaly[] };
}

export interface ChaosOptions {
  /** Faults to inject, in rotation over every kind (default 21). */
  faults?: number;
  log?: (line: string) => void;
  /** Longest wait for convergence after one fault, ms. */
  convergeTimeoutMs?: number;
  /** Pause between two writes of one load worker, ms (default 20; the suite's short form paces its load). */
  pauseMs?: number;
}

const ROTATION: Array<[FaultKind, string]> = [
  ['kill-primary', 'dc1'],
  ['kill-secondary', 'dc2'],
  ['freeze-secondary', 'dc3'],
  ['cut-link', 'dc2'],
  ['kill-secondary', 'dc3'],
  ['freeze-secondary', 'dc2'],
  ['cut-link', 'dc3'],
];

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Answer {
  status: number;
  body: unknown;
  /** The answer's headers (none when there was no answer). */
  headers?: Headers;
}

/** One request; a connection failure or timeout is status 0 (outcome unknown). */
export async function call(url: string, token: string, method: string, path: string, body?: unknown, timeoutMs = 8000): Promise<Answer> {
  return request(url, { 'X-Service-Token': token }, method, path, body, timeoutMs);
}

/** One request with the headers given; as `call`. */
export async function request(
  url: string,
  headers: Record<string, string>,
  method: string,
  path: string,
  body?: unknown,
  timeoutMs = 8000,
): Promise<Answer> {
  try {
    return await jsonCall(url, headers, method, path, body, timeoutMs);
  } catch {
    return { status: 0, body: undefined };
  }
}

/** The continuous mixed load, with what it was told. */
/** One writer of a chaos run's load. */
export interface Writer {
  run: () => Promise<void>;
  pauseMs?: number;
}

/**
 * Writes kept going during a chaos run, each acknowledged one remembered so that it can be
 * checked on every server afterwards. The HA run extends it (its servers in turn, logins).
 */
export class Load {
  /** Acknowledged token creates: AccessorID -> datacenter it was made in and whether it is Local. */
  readonly created = new Map<string, { dc: string; local: boolean }>();
  readonly deleted = new Set<string>();
  /** Deletes whose outcome is unknown (the token may or may not be there). */
  readonly unsure = new Set<string>();
  ambiguous = 0;
  /** Ambiguous answers by what was asked and how it was answered (`create at dc2: 503 NO_LEADER`). */
  readonly ambiguousBy = new Map<string, number>();
  readonly bad: string[] = [];
  /** Every operation on a token, as sent and answered, for the history checks. */
  readonly history = new HistoryRecorder();
  /** Every token a create was sent for (acknowledged or not), with its secret and datacenter. */
  protected readonly tokens: Array<{ id: string; secret: string; dc: string; local: boolean }> = [];
  private active = false;
  private workers: Array<Promise<void>> = [];
  protected seq = 0;
  /** The primary datacenter: where global writes and deletes go, and a global token's home (a promotion moves it). */
  primary = 'dc1';
  /** Acknowledged global creates and deletes made at the primary, by AccessorID: the primary's index in the answer. */
  readonly writtenAt = new Map<string, { op: 'create' | 'delete'; dc: string; index: number }>();

  constructor(
    protected readonly cluster: Cluster,
    protected readonly token: string,
    /** Pause between two writes of one worker, ms. */
    private readonly pauseMs = 20,
  ) {}

  /** Where a request to datacenter `dc` goes. */
  url(dc: string): string {
    return this.cluster.get(dc).url;
  }

  /** True for an acknowledged write; a 503 or no answer counts as ambiguous, anything else as bad. */
  protected judge(what: string, a: Answer): boolean {
    if (a.status === 200) return true;
    if (a.status === 0 || a.status === 503) {
      this.ambiguous++;
      const why = `${what.replace(/ of [0-9a-f-]{36}$/, '')}: ${a.status} ${(a.body as { code?: string } | undefined)?.code ?? ''}`.trim();
      this.ambiguousBy.set(why, (this.ambiguousBy.get(why) ?? 0) + 1);
      return false;
    }
    this.bad.push(`${what}: HTTP ${a.status} ${JSON.stringify(a.body).slice(0, 200)}`);
    return false;
  }

  private loop(body: () => Promise<void>, pauseMs: number): Promise<void> {
    return (async () => {
      while (this.active) {
        await body();
        await sleep(pauseMs);
      }
    })();
  }

  /** Records one operation, timed, with what its answer says. */
  protected async timed(
    op: Omit<Operation, 'invoked' | 'completed' | 'outcome'>,
    send: () => Promise<Answer>,
    found?: (a: Answer) => boolean | undefined,
  ): Promise<Answer> {
    const invoked = Date.now();
    const a = await send();
    const completed = Date.now();
    const index = Number(a.headers?.get('x-service-index') ?? Number.NaN);
    const saw = found?.(a);
    // A read that got no clear answer says nothing; a write without one may or may not have happened.
    const outcome: Operation['outcome'] = found
      ? saw === undefined
        ? 'unknown'
        : 'ok'
      : a.status === 200
        ? 'ok'
        : a.status === 0 || a.status >= 500
          ? 'unknown'
          : 'fail';
    this.history.record({
      ...op,
      invoked,
      completed,
      outcome,
      ...(saw !== undefined ? { found: saw } : {}),
      ...(Number.isFinite(index) ? { index } : {}),
      ...(a.headers?.get('x-service-replication-pending') === 'true' ? { pending: true } : {}),
    });
    return a;
  }

  protected create(dc: string, local: boolean): () => Promise<void> {
    const process = `writer-${dc}-${local ? 'local' : 'global'}-${this.seq++}`;
    return async () => {
      // IDs chosen here, so that a create whose answer is lost is still in the history.
      const id = randomUUID();
      const secret = randomUUID();
      this.tokens.push({ id, secret, dc, local });
      const url = this.url(dc);
      const home = local ? dc : this.primary;
      const a = await this.timed({ process, kind: 'create', key: id, dc, server: url, home }, () =>
        call(url, this.token, 'PUT', '/v1/acl/token', {
          AccessorID: id,
          SecretID: secret,
          Description: `chaos ${this.seq++}`,
          ...(local ? { Local: true } : {}),
        }),
      );
      if (!this.judge(`create at ${dc}`, a)) return;
      this.created.set(id, { dc, local });
      if (!local && dc === home) this.writtenAt.set(id, { op: 'create', dc, index: Number(a.headers?.get('x-service-index') ?? 0) });
      // Read it back where it was written (read-your-writes).
      await this.timed(
        { process, kind: 'read', key: id, dc, server: url },
        () => call(url, this.token, 'GET', `/v1/acl/token/${id}`),
        foundBy404,
      );
    };
  }

  /**
   * A client reading tokens at `dc` (its own datacenter for a Local one), with `?consistent`
   * or not, or by its secret (self, a decision).
   */
  protected reader(dc: string, how: 'default' | 'consistent' | 'secret'): () => Promise<void> {
    const process = `reader-${dc}-${how}-${this.seq++}`;
    return async () => {
      const candidates = this.tokens.filter((t) => !t.local || t.dc === dc);
      const t = candidates[Math.floor(Math.random() * candidates.length)];
      if (!t) return;
      const url = this.url(dc);
      const op = { process, key: t.id, dc, server: url };
      if (how === 'secret') {
        if (Math.random() < 0.5)
          await this.timed(
            { ...op, kind: 'self' },
            () => request(url, { 'X-Service-Token': t.secret }, 'GET', '/v1/acl/token/self'),
            foundBy403,
          );
        else
          await this.timed(
            { ...op, kind: 'decision' },
            () =>
              request(url, { 'X-Service-Token': t.secret }, 'POST', '/v1/internal/acl/authorize', [{ Resource: 'acl', Access: 'read' }]),
            foundBy403,
          );
        return;
      }
      const consistent = how === 'consistent';
      await this.timed(
        { ...op, kind: 'read', ...(consistent ? { consistent } : {}) },
        () => call(url, this.token, 'GET', `/v1/acl/token/${t.id}${consistent ? '?consistent' : ''}`),
        foundBy404,
      );
    };
  }

  protected readonly remove = async (): Promise<void> => {
    const candidates = [...this.created].filter(([id, t]) => !t.local && !this.deleted.has(id) && !this.unsure.has(id));
    if (candidates.length < 5) return;
    const [id] = candidates[Math.floor(Math.random() * candidates.length)] as [string, unknown];
    const dc = this.primary;
    const url = this.url(dc);
    const a = await this.timed({ process: 'deleter', kind: 'delete', key: id, dc, server: url }, () =>
      call(url, this.token, 'DELETE', `/v1/acl/token/${id}`),
    );
    if (a.status === 200 && a.body === true) {
      this.deleted.add(id);
      this.writtenAt.set(id, { op: 'delete', dc, index: Number(a.headers?.get('x-service-index') ?? 0) });
    } else if (this.judge(`delete at ${dc} of ${id}`, a))
      this.bad.push(`delete at ${dc} of acknowledged token ${id}: answered ${JSON.stringify(a.body)}`);
    else this.unsure.add(id);
  };

  /** A policy, a role linking it, and (with `update`) the policy changed again. */
  protected policyAndRole(update: boolean): () => Promise<void> {
    return async () => {
      const n = this.seq++;
      const p = await call(this.url(this.primary), this.token, 'PUT', '/v1/acl/policy', { Name: `chaos-${n}`, Rules: 'acl = "read"' });
      if (!this.judge('policy create', p)) return;
      const id = (p.body as { ID: string }).ID;
      this.judge(
        'role create',
        await call(this.url(this.primary), this.token, 'PUT', '/v1/acl/role', { Name: `chaos-role-${n}`, Policies: [{ ID: id }] }),
      );
      if (update)
        this.judge(
          'policy update',
          await call(this.url(this.primary), this.token, 'PUT', `/v1/acl/policy/${id}`, {
            Name: `chaos-${n}`,
            Description: 'updated',
            Rules: 'acl = "read"',
          }),
        );
    };
  }

  /** The writers of this run; a pause of its own where one differs from the run's. */
  protected writers(): Writer[] {
    return [
      { run: this.create('dc1', false) },
      { run: this.create('dc1', false) },
      { run: this.create('dc2', false) },
      { run: this.remove },
      { run: this.policyAndRole(true) },
      { run: this.create('dc2', true) },
      { run: this.create('dc3', true) },
      { run: this.reader('dc1', 'consistent') },
      { run: this.reader('dc1', 'secret') },
      { run: this.reader('dc2', 'default') },
      { run: this.reader('dc2', 'consistent') },
      { run: this.reader('dc3', 'default') },
    ];
  }

  start(): void {
    this.active = true;
    this.workers = this.writers().map((w) => this.loop(w.run, w.pauseMs ?? this.pauseMs));
  }

  async stop(): Promise<void> {
    this.active = false;
    await Promise.all(this.workers);
  }
}

/** A token read: 200 found, 404 not found, anything else no clear answer. */
const foundBy404 = (a: Answer): boolean | undefined => (a.status === 200 ? true : a.status === 404 ? false : undefined);
/** A read by the token's own secret: 200 found, 403 ACL not found, anything else no clear answer. */
const foundBy403 = (a: Answer): boolean | undefined =>
  a.status === 200 ? true : a.status === 403 && (a.body as { code?: string } | undefined)?.code === 'ACL_NOT_FOUND' ? false : undefined;

export type State = Record<string, string>;

/**
 * Every global object of a datacenter as id -> Hash, across all namespaces (undefined when it
 * cannot answer). `stale`: one server's own copy (?stale), not its leader's.
 */
export async function globalState(
  url: string,
  token: string,
  options: { stale?: boolean; timeoutMs?: number } = {},
): Promise<State | undefined> {
  const out: State = {};
  const q = options.stale ? '?ns=*&stale' : '?ns=*';
  const lists: Array<[string, string, string]> = [
    ['policy', `/v1/acl/policies${q}`, 'ID'],
    ['role', `/v1/acl/roles${q}`, 'ID'],
    ['token', `/v1/acl/tokens${q}`, 'AccessorID'],
  ];
  for (const [kind, path, idField] of lists) {
    const a = await call(url, token, 'GET', path, undefined, options.timeoutMs);
    if (a.status !== 200) return undefined;
    for (const o of a.body as Array<Record<string, unknown>>) {
      if (kind === 'token' && o.Local) continue;
      out[`${kind}:${o[idField] as string}`] = o.Hash as string;
    }
  }
  return out;
}

export const same = (a: State | undefined, b: State | undefined): boolean =>
  a !== undefined && b !== undefined && JSON.stringify(Object.entries(a).sort()) === JSON.stringify(Object.entries(b).sort());

/** Waits until every datacenter answers with the primary's global objects; returns whether it did in time. */
async function converge(cluster: Cluster, token: string, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const primary = await globalState(cluster.primary.url, token);
    let all = primary !== undefined;
    for (const d of cluster.datacenters.slice(1)) {
      if (!all) break;
      const status = await call(d.url, token, 'GET', '/v1/acl/replication');
      if (status.status !== 200 || !(status.body as { Connected: boolean }).Connected) all = false;
      else all = same(await globalState(d.url, token), primary);
    }
    if (all) return true;
    await sleep(200);
  }
  return false;
}

async function inject(cluster: Cluster, kind: FaultKind, target: string): Promise<{ heldMs: number }> {
  const d = cluster.get(target);
  const held = Date.now();
  switch (kind) {
    case 'kill-primary':
    case 'kill-secondary':
      await d.kill();
      await sleep(1500);
      await d.start();
      break;
    case 'freeze-secondary': {
      const pid = d.pid as number;
      process.kill(pid, 'SIGSTOP');
      // Longer than the 7 s a peer may stay silent.
      await sleep(9000);
      process.kill(pid, 'SIGCONT');
      break;
    }
    case 'cut-link':
      cluster.link(target).cut();
      await sleep(4000);
      cluster.link(target).restore();
      break;
  }
  return { heldMs: Date.now() - held };
}

export async function runChaos(options: ChaosOptions = {}): Promise<ChaosReport> {
  const total = options.faults ?? 21;
  const log = options.log ?? (() => undefined);
  const started = Date.now();
  const cluster = await startCluster({ datacenters: ['dc1', 'dc2', 'dc3'], links: true, timings: 'production' });
  const token = cluster.managementToken;
  const load = new Load(cluster, token, options.pauseMs);
  const faults: FaultResult[] = [];
  try {
    await cluster.waitForReplication();
    for (let n = 1; n <= total; n++) {
      const [kind, target] = ROTATION[(n - 1) % ROTATION.length] as [FaultKind, string];
      load.start();
      await sleep(1000);
      const { heldMs } = await inject(cluster, kind, target);
      const undone = Date.now();
      await load.stop();
      const converged = await converge(cluster, token, options.convergeTimeoutMs ?? 60_000);
      const result = { n, kind, target, heldMs, convergedMs: Date.now() - undone, converged };
      faults.push(result);
      log(
        `fault ${n}/${total}: ${kind} ${target}, held ${(heldMs / 1000).toFixed(1)} s, ` +
          `${converged ? `converged in ${(result.convergedMs / 1000).toFixed(2)} s` : 'DID NOT CONVERGE'}`,
      );
      if (!converged) break;
    }

    // Every acknowledged write, as the load was told.
    const lost: string[] = [];
    const resurrected: string[] = [];
    const leaked: string[] = [];
    const present = async (dc: string, id: string) => (await call(cluster.get(dc).url, token, 'GET', `/v1/acl/token/${id}`)).status === 200;
    for (const [id, t] of load.created) {
      if (load.unsure.has(id)) continue;
      const home = t.local ? t.dc : 'dc1';
      const there = await present(home, id);
      if (load.deleted.has(id)) {
        if (there) resurrected.push(id);
      } else if (!there) {
        lost.push(`${t.local ? 'Local' : 'global'} token ${id} made at ${t.dc}`);
      }
      if (t.local)
        for (const dc of ['dc1', 'dc2', 'dc3']) if (dc !== t.dc && (await present(dc, id))) leaked.push(`${id} of ${t.dc} seen at ${dc}`);
    }
    const times = faults.map((f) => f.convergedMs).sort((a, b) => a - b);
    return {
      faults,
      durationMs: Date.now() - started,
      medianConvergenceMs: times.length
        ? ((times[(times.length - 1) >> 1] as number) + (times[times.length >> 1] as number)) / 2
        : Number.NaN,
      writes: { acknowledged: load.created.size, ambiguous: load.ambiguous, deletes: load.deleted.size },
      lost,
      resurrected,
      leaked,
      bad: load.bad,
      history: { operations: load.history.ops.length, anomalies: load.history.check() },
    };
  } finally {
    await load.stop();
    await cluster.stop();
  }
}
