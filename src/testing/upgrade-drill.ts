/**
 * The upgrade drill behind `npm run upgrade-drill` (docs/upgrading.md, "Upgrading"): three datacenters (dc1
 * of three servers and etcd, dc2 and dc3 of one each) start on the previous release; under global
 * and Local writes, logins, reads and enforcing clients of both releases, every server is upgraded
 * one at a time (secondaries first, then the primary's followers and its leader last), all are
 * rolled back one at a time, upgraded again with the primary first, dc3 is rolled back alone (and
 * must serve every token it had) and upgraded again, and the upgrade is finalized. It reports what
 * an operator must know: acknowledged writes lost, requests refused outside a leader election,
 * the longest refusal window of each step, the history checker's anomalies, and the enforcing
 * clients' wrong decisions. Every loop is bounded.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { OperatorUpgradeResponse } from '../api/schemas.js';
import { Authorizer } from '../client/authorizer.js';
import { PREVIOUS_RELEASE, VERSION } from '../version.js';
import { authMethod } from './chaos-ha.js';
import { type Answer, Load, type Writer, call, sleep } from './chaos.js';
import { describeAnomaly } from './history.js';
import { type Cluster, type DatacenterHandle, startCluster } from './index.js';
import { running } from './revoker.js';

export interface DrillStep {
  step: string;
  /** Requests refused (or unanswered) while the step ran, and the span from the first to the last (ms). */
  refused: number;
  windowMs: number;
  /** Whether the step restarted a datacenter's leader (a leader election: refusals allowed within it). */
  election: boolean;
  durationMs: number;
}

export interface DrillReport {
  steps: DrillStep[];
  lost: string[];
  refusedOutsideElection: number;
  anomalies: string[];
  wrongDecisions: string[];
  rolledBack: { datacenter: string; tokens: number; missing: string[] };
  finalized: OperatorUpgradeResponse['Finalized'];
  /** Servers that did not stop on SIGTERM in time (killed instead). */
  stuck: string[];
  writes: { acknowledged: number; ambiguous: number };
  durationMs: number;
}

/** The load of the drill: every running server of a datacenter in turn (one being restarted left out), logins too. */
class DrillLoad extends Load {
  logins = 0;
  private turn = 0;
  /** Servers left out of the rotation (drained before a restart, as a load balancer would). */
  readonly drained = new Set<string>();
  /** Answers that were not 200 (or no answer), with when: the refusals of a step. */
  readonly refusals: Array<{ at: number; what: string }> = [];

  constructor(
    cluster: Cluster,
    token: string,
    private readonly jwt: () => Promise<string>,
  ) {
    super(cluster, token, 40);
  }

  override url(dc: string): string {
    const servers = running(this.cluster.get(dc)).filter((s) => !this.drained.has(s.serverName));
    const s = servers[this.turn++ % Math.max(1, servers.length)];
    // Every server of the datacenter drained (a single-server datacenter restarting): nothing is sent there.
    return s?.url ?? 'http://127.0.0.1:9';
  }

  /** Whether a datacenter has a server to send to now. */
  reachable(dc: string): boolean {
    return running(this.cluster.get(dc)).some((s) => !this.drained.has(s.serverName));
  }

  protected override judge(what: string, a: Answer): boolean {
    if (a.status !== 200) this.refusals.push({ at: Date.now(), what: `${what}: ${a.status} ${(a.body as { code?: string })?.code ?? ''}` });
    return super.judge(what, a);
  }

  private login(dc: string): () => Promise<void> {
    return async () => {
      if (!this.reachable(dc)) return;
      const a = await call(this.url(dc), '', 'POST', '/v1/acl/login', { AuthMethod: 'chaos', BearerToken: await this.jwt() });
      if (this.judge(`login at ${dc}`, a)) {
        this.logins++;
        this.created.set((a.body as { AccessorID: string }).AccessorID, { dc, local: true });
      }
    };
  }

  /** A writer that holds off while its datacenter has no server to send to. */
  private when(dc: string, run: () => Promise<void>): () => Promise<void> {
    return async () => {
      if (this.reachable(dc) && this.reachable(this.primary)) await run();
    };
  }

  protected override writers(): Writer[] {
    return [
      { run: this.when('dc1', this.create('dc1', false)) },
      { run: this.when('dc2', this.create('dc2', false)) },
      { run: this.when('dc3', this.create('dc3', true)) },
      { run: this.when('dc1', this.create('dc1', true)) },
      { run: this.when('dc2', this.create('dc2', true)) },
      { run: this.when('dc1', this.remove) },
      { run: this.when('dc2', this.login('dc2')), pauseMs: 200 },
      { run: this.when('dc1', this.reader('dc1', 'secret')) },
      { run: this.when('dc2', this.reader('dc2', 'default')) },
      { run: this.when('dc3', this.reader('dc3', 'default')) },
    ];
  }
}

/** Enforcing clients of both releases asking, once a second, about tokens that live and tokens deleted. */
class Deciders {
  readonly wrong: string[] = [];
  private readonly live: Array<{ secret: string; at: number }> = [];
  private readonly gone: Array<{ secret: string; at: number }> = [];
  private active = false;
  private worker: Promise<void> | undefined;

  constructor(
    private readonly clients: Array<{
      name: string;
      authz: Pick<Authorizer, 'allowed' | 'close' | 'stats'>;
      graceMs: number;
      /** Whether the servers it asks are up (not being restarted): answers while they are not are the down policy's. */
      up: () => boolean;
    }>,
  ) {}

  /** A token made (acknowledged at the primary now): allowed by every client once it has had time to reach their servers. */
  add(secret: string): void {
    this.live.push({ secret, at: Date.now() });
  }

  /** A token deleted (acknowledged at `at`): denied by every client after its grace. */
  deleted(secret: string, at: number): void {
    const i = this.live.findIndex((l) => l.secret === secret);
    if (i >= 0) this.live.splice(i, 1);
    this.gone.push({ secret, at });
  }

  start(): void {
    this.active = true;
    this.worker = (async () => {
      while (this.active) {
        for (const c of this.clients) {
          if (!c.up() || c.authz.stats().down) continue;
          for (const l of this.live.slice(-20)) {
            if (Date.now() - l.at < c.graceMs) continue;
            const allowed = await c.authz.allowed(l.secret, 'acl', '', 'read');
            if (!allowed && this.live.includes(l) && c.up() && !c.authz.stats().down)
              this.wrong.push(`${c.name} denied a token made ${Date.now() - l.at} ms before`);
          }
          for (const g of this.gone.slice(-20)) {
            if (Date.now() - g.at < c.graceMs) continue;
            if (await c.authz.allowed(g.secret, 'acl', '', 'read'))
              this.wrong.push(`${c.name} allowed a token deleted ${Date.now() - g.at} ms ago`);
          }
        }
        await sleep(1000);
      }
    })();
  }

  async stop(): Promise<void> {
    this.active = false;
    await this.worker;
    for (const c of this.clients) c.authz.close();
  }
}

/** Every server of the cluster, the primary datacenter's followers before its leader. */
async function order(cluster: Cluster, dcs: string[]): Promise<DatacenterHandle[]> {
  const out: DatacenterHandle[] = [];
  for (const dc of dcs) {
    const d = cluster.get(dc);
    if (d.servers.length === 1) {
      out.push(d);
      continue;
    }
    const leader = await d.leader();
    out.push(...d.servers.filter((s) => s !== leader), leader);
  }
  return out;
}

export interface DrillOptions {
  /** The previous release's dist/main.js (testing/previous-release.ts). */
  previous: string;
  log?: (line: string) => void;
  /** Where to write each server's output at the end (its log lines, at `info`). */
  logDir?: string;
}

export async function runUpgradeDrill(options: DrillOptions): Promise<DrillReport> {
  const log = options.log ?? (() => undefined);
  const started = Date.now();
  log(`started at ${new Date(started).toISOString()} (the times below are from then)`);
  const names = ['dc1-server-1', 'dc1-server-2', 'dc1-server-3', 'dc2-node', 'dc3-node'];
  const cluster = await startCluster({
    datacenters: { dc1: { servers: 3 }, dc2: { servers: 1 }, dc3: { servers: 1 } },
    programs: Object.fromEntries(names.map((n) => [n, options.previous])),
    timings: 'production',
    ...(options.logDir ? { logLevel: 'info' } : {}),
  });
  const drill = new Drill(cluster, options, log, started);
  try {
    await drill.begin();
    await drill.pass('upgrade, secondaries first', ['dc2', 'dc3', 'dc1'], undefined);
    await drill.pass('rollback', ['dc1', 'dc2', 'dc3'], options.previous);
    await drill.pass('upgrade, the primary first', ['dc1', 'dc2', 'dc3'], undefined);
    const rolledBack = await drill.rollBackOne('dc3');
    const finalized = await drill.finish();
    return { ...drill.report(), lost: await drill.lostWrites(), rolledBack, finalized, durationMs: Date.now() - started };
  } finally {
    await drill.end();
    await cluster.stop();
  }
}

/** One run of the drill: the cluster under load and watched by enforcing clients of both releases, restarted server by server. */
class Drill {
  private readonly token: string;
  private readonly steps: DrillStep[] = [];
  private readonly stuck: string[] = [];
  private load: DrillLoad | undefined;
  private deciders: Deciders | undefined;
  private readerID = '';

  constructor(
    private readonly cluster: Cluster,
    private readonly options: DrillOptions,
    private readonly log: (line: string) => void,
    private readonly started: number,
  ) {
    this.token = cluster.managementToken;
  }

  /** The load and the deciders started, once every datacenter holds the policy their tokens use. */
  async begin(): Promise<void> {
    const { cluster, token } = this;
    await cluster.waitForReplication();
    const jwt = await authMethod(cluster, token);
    const reader = await call((await cluster.primary.leader()).url, token, 'PUT', '/v1/acl/policy', {
      Name: 'drill-read',
      Rules: 'acl = "read"',
    });
    this.readerID = (reader.body as { ID: string }).ID;
    await cluster.waitForReplication();
    const load = new DrillLoad(cluster, token, jwt);
    this.load = load;
    const Previous = (
      (await import(pathToFileURL(join(dirname(this.options.previous), 'client', 'index.js')).href)) as { Authorizer: typeof Authorizer }
    ).Authorizer;
    // This release's client at dc2 (its watch, or blocking reads while dc2 runs the previous release); the previous one's at dc1 (HTTP).
    this.deciders = new Deciders([
      {
        name: `Authorizer ${VERSION} at dc2`,
        authz: new Authorizer({ addresses: [cluster.get('dc2').url], token, tokenTTL: '2s' }),
        graceMs: 15_000,
        up: () => load.reachable('dc2'),
      },
      {
        name: `Authorizer ${PREVIOUS_RELEASE.version} at dc1`,
        authz: new Previous({ addresses: cluster.get('dc1').servers.map((s) => s.url), tokenTTL: '2s' }),
        graceMs: 15_000,
        up: () => load.reachable('dc1'),
      },
    ]);
    for (let i = 0; i < 5; i++) await this.decided();
    await cluster.waitForReplication();
    load.start();
    this.deciders.start();
  }

  /** A token the deciders judge from now on. */
  private async decided(): Promise<{ SecretID: string; AccessorID: string } | undefined> {
    const t = await call((await this.cluster.primary.leader()).url, this.token, 'PUT', '/v1/acl/token', {
      Policies: [{ ID: this.readerID }],
    });
    if (t.status !== 200) return undefined;
    const made = t.body as { SecretID: string; AccessorID: string };
    this.deciders?.add(made.SecretID);
    return made;
  }

  /** Every server of `dcs` restarted on `program` (undefined: this release), the primary datacenter's leader last. */
  async pass(name: string, dcs: string[], program: string | undefined): Promise<void> {
    for (const s of await order(this.cluster, dcs))
      await this.restart(s, program, `${name}: ${s.serverName} to ${program ? PREVIOUS_RELEASE.version : VERSION}`);
  }

  private async restart(s: DatacenterHandle, program: string | undefined, step: string): Promise<void> {
    const { cluster, token, load } = this;
    const t0 = Date.now();
    const election = s.servers.length > 1 && (await s.leader(5000).catch(() => undefined))?.serverName === s.serverName;
    const before = load?.refusals.length ?? 0;
    load?.drained.add(s.serverName);
    await sleep(300);
    // A leader hands its leadership to a synchronous follower first, as docs/upgrading.md "Upgrading" says, and is restarted as a
    // follower: asked of a server of this release (the previous one has no such request), which may be the leader itself.
    if (election) await handOver(cluster.get(s.name), s, token, this.log);
    // As a supervisor would: SIGTERM, and SIGKILL past 20 s (a daemon of 0.1.0 may wait forever on a watch's close).
    await Promise.race([s.stop(), sleep(20_000)]);
    if (s.pid !== undefined) {
      this.stuck.push(`${s.serverName} (${s.program ? PREVIOUS_RELEASE.version : VERSION}) did not stop within 20 s of SIGTERM: killed`);
      await s.kill();
    }
    s.program = program;
    await s.start();
    // Back in the rotation once it says it can do its job (a load balancer's health check): its leader known, caught up.
    await waitUntil(async () => (await call(s.url, '', 'GET', '/v1/agent/health', undefined, 2000)).status === 200, 60_000);
    load?.drained.delete(s.serverName);
    await cluster.waitForReplication(60_000);
    await sleep(500);
    const refusals = (load?.refusals ?? []).slice(before);
    const window = refusals.length > 0 ? (refusals[refusals.length - 1]?.at ?? 0) - (refusals[0]?.at ?? 0) : 0;
    this.steps.push({ step, refused: refusals.length, windowMs: window, election, durationMs: Date.now() - t0 });
    this.log(`${step}: ${refusals.length} refused${refusals.length ? ` over ${window} ms${election ? ' (a leader election)' : ''}` : ''}`);
    // A token of the deciders made and one deleted at each step, so both clients judge changes across releases.
    await this.decided();
    const victim = await this.decided();
    if (victim) {
      await cluster.waitForReplication(60_000);
      const del = await call((await cluster.primary.leader()).url, token, 'DELETE', `/v1/acl/token/${victim.AccessorID}`);
      if (del.status === 200) this.deciders?.deleted(victim.SecretID, Date.now());
    }
  }

  /** One datacenter alone back on the previous release, then on this one again: what it served before, it serves on the previous. */
  async rollBackOne(name: string): Promise<DrillReport['rolledBack']> {
    const { cluster, token } = this;
    const dc = cluster.get(name);
    const held = await tokensAt(dc.url, token);
    await this.restart(dc, this.options.previous, `rollback of ${name} alone`);
    const after = await tokensAt(dc.url, token);
    // A token gone is missing unless the primary deleted it meanwhile (the load deletes global tokens as it goes).
    const missing: string[] = [];
    for (const id of held.filter((x) => !after.includes(x))) {
      const local = this.load?.created.get(id)?.local === true;
      const atPrimary = local ? undefined : await call((await cluster.primary.leader()).url, token, 'GET', `/v1/acl/token/${id}`);
      if (local || atPrimary?.status !== 404) missing.push(id);
    }
    await this.restart(dc, undefined, `${name} to ${VERSION} again`);
    return { datacenter: name, tokens: held.length, missing };
  }

  /** The load stopped, everything replicated, and the upgrade finalized once the cluster says it may be: whether it is. */
  async finish(): Promise<OperatorUpgradeResponse['Finalized']> {
    await this.load?.stop();
    await this.deciders?.stop();
    await this.cluster.waitForReplication(60_000);
    const leader = await this.cluster.primary.leader();
    const status = async () => (await call(leader.url, this.token, 'GET', '/v1/operator/upgrade')).body as OperatorUpgradeResponse;
    await waitUntil(async () => (await status()).CanFinalize, 30_000);
    const finalized = await call(leader.url, this.token, 'PUT', '/v1/operator/upgrade?finalize');
    if (finalized.status !== 200) throw new Error(`finalize: ${finalized.status} ${JSON.stringify(finalized.body)}`);
    return (finalized.body as OperatorUpgradeResponse).Finalized;
  }

  /** Every acknowledged write not found where it lives, with its story (the history's operations on it, each server's answer). */
  async lostWrites(): Promise<string[]> {
    const { cluster, token, load } = this;
    const lost: string[] = [];
    for (const [id, t] of load?.created ?? []) {
      if (load?.unsure.has(id) || load?.deleted.has(id)) continue;
      const home = await cluster.get(t.local ? t.dc : 'dc1').leader();
      const there = await call(home.url, token, 'GET', `/v1/acl/token/${id}`);
      if (there.status === 200) continue;
      const ops = load?.history.ops.filter((o) => o.key === id) ?? [];
      const story = describeAnomaly({ kind: 'unchecked', key: id, message: 'acknowledged, then not found at its home', ops }, this.started);
      const servers: string[] = [];
      for (const x of cluster.get(t.local ? t.dc : 'dc1').servers)
        servers.push(`${x.serverName}${x === home ? ' (leader)' : ''}: ${(await call(x.url, token, 'GET', `/v1/acl/token/${id}`)).status}`);
      lost.push(`${t.local ? 'Local' : 'global'} ${id} made at ${t.dc}\n${story}\n    now: ${servers.join(', ')}`);
    }
    return lost;
  }

  /** What the steps, the history and the deciders say. */
  report(): Omit<DrillReport, 'lost' | 'rolledBack' | 'finalized' | 'durationMs'> {
    const load = this.load;
    return {
      steps: this.steps,
      refusedOutsideElection: this.steps.filter((s) => !s.election).reduce((n, s) => n + s.refused, 0),
      anomalies: (load?.history.check() ?? []).map((a) => describeAnomaly(a, this.started)),
      wrongDecisions: this.deciders?.wrong ?? [],
      stuck: this.stuck,
      writes: { acknowledged: load?.created.size ?? 0, ambiguous: load?.ambiguous ?? 0 },
    };
  }

  /** The load and deciders stopped (if still running), and each server's output written where asked. */
  async end(): Promise<void> {
    await this.load?.stop();
    await this.deciders?.stop().catch(() => undefined);
    const dir = this.options.logDir;
    if (!dir) return;
    await mkdir(dir, { recursive: true });
    for (const d of this.cluster.datacenters) for (const s of d.servers) await writeFile(join(dir, `${s.serverName}.log`), s.output());
    await writeFile(
      join(dir, 'refusals.log'),
      (this.load?.refusals ?? []).map((r) => `${new Date(r.at).toISOString()} ${r.what}`).join('\n'),
    );
  }
}

/** The datacenter's leadership handed away from `leader`, through a server of its datacenter that runs this release. */
async function handOver(dc: DatacenterHandle, leader: DatacenterHandle, token: string, log: (line: string) => void): Promise<void> {
  const asked = dc.servers.find((x) => x.program === undefined && x.pid !== undefined);
  if (!asked) return log(`  no server of ${dc.name} runs ${VERSION}: ${leader.serverName} is stopped as the leader`);
  for (let tries = 0; ; tries++) {
    const a = await call(asked.url, token, 'POST', '/v1/operator/raft/transfer-leader', undefined, 15_000);
    if (a.status === 200) return;
    // Its synchronous set may be catching up after the last restart: asked again, for a while.
    if (tries >= 20) throw new Error(`handing the leadership of ${dc.name} over: ${a.status} ${JSON.stringify(a.body)}`);
    await sleep(500);
  }
}

/** Every token a datacenter serves (its Local ones and the global ones), by AccessorID. */
async function tokensAt(url: string, token: string): Promise<string[]> {
  const a = await call(url, token, 'GET', '/v1/acl/tokens?ns=*', undefined, 30_000);
  if (a.status !== 200) throw new Error(`listing the tokens at ${url}: ${a.status}`);
  return (a.body as Array<{ AccessorID: string }>).map((t) => t.AccessorID);
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms`);
    await sleep(200);
  }
}
