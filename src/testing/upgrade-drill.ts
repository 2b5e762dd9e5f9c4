/**
 * The upgrade drill behind `npm run upgrade-drill` (README, "Upgrading"): three datacenters (dc1
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
  const names = ['dc1-server-1', 'dc1-server-2', 'dc1-server-3', 'dc2-node', 'dc3-node'];
  const cluster = await startCluster({
    datacenters: { dc1: { servers: 3 }, dc2: { servers: 1 }, dc3: { servers: 1 } },
    programs: Object.fromEntries(names.map((n) => [n, options.previous])),
    timings: 'production',
    ...(options.logDir ? { logLevel: 'info' } : {}),
  });
  const token = cluster.managementToken;
  const steps: DrillStep[] = [];
  const stuck: string[] = [];
  let load: DrillLoad | undefined;
  let deciders: Deciders | undefined;
  try {
    await cluster.waitForReplication();
    const jwt = await authMethod(cluster, token);
    const reader = await call((await cluster.primary.leader()).url, token, 'PUT', '/v1/acl/policy', {
      Name: 'drill-read',
      Rules: 'acl = "read"',
    });
    const readerID = (reader.body as { ID: string }).ID;
    await cluster.waitForReplication();
    load = new DrillLoad(cluster, token, jwt);
    const Previous = (
      (await import(pathToFileURL(join(dirname(options.previous), 'client', 'index.js')).href)) as { Authorizer: typeof Authorizer }
    ).Authorizer;
    // This release's client at dc2 (its watch, or blocking reads while dc2 runs the previous release); the previous one's at dc1 (HTTP).
    deciders = new Deciders([
      {
        name: `Authorizer ${VERSION} at dc2`,
        authz: new Authorizer({ addresses: [cluster.get('dc2').url], token, tokenTTL: '2s' }),
        graceMs: 15_000,
        up: () => load?.reachable('dc2') === true,
      },
      {
        name: `Authorizer ${PREVIOUS_RELEASE.version} at dc1`,
        authz: new Previous({ addresses: cluster.get('dc1').servers.map((s) => s.url), tokenTTL: '2s' }),
        graceMs: 15_000,
        up: () => load?.reachable('dc1') === true,
      },
    ]);
    const decided = async (n: number) => {
      for (let i = 0; i < n; i++) {
        const t = await call((await cluster.primary.leader()).url, token, 'PUT', '/v1/acl/token', { Policies: [{ ID: readerID }] });
        if (t.status === 200) deciders?.add((t.body as { SecretID: string }).SecretID);
      }
    };
    await decided(5);
    await cluster.waitForReplication();
    load.start();
    deciders.start();

    const restart = async (s: DatacenterHandle, program: string | undefined, step: string) => {
      const t0 = Date.now();
      const election = s.servers.length > 1 && (await s.leader(5000).catch(() => undefined))?.serverName === s.serverName;
      const before = load?.refusals.length ?? 0;
      load?.drained.add(s.serverName);
      await sleep(300);
      // As a supervisor would: SIGTERM, and SIGKILL past 20 s (a daemon of 0.1.0 may wait forever on a watch's close).
      await Promise.race([s.stop(), sleep(20_000)]);
      if (s.pid !== undefined) {
        stuck.push(`${s.serverName} (${s.program ? PREVIOUS_RELEASE.version : VERSION}) did not stop within 20 s of SIGTERM: killed`);
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
      steps.push({ step, refused: refusals.length, windowMs: window, election, durationMs: Date.now() - t0 });
      log(`${step}: ${refusals.length} refused${refusals.length ? ` over ${window} ms${election ? ' (a leader election)' : ''}` : ''}`);
      // A token of the deciders made and one deleted at each step, so both clients judge changes across releases.
      await decided(1);
      const victim = await call((await cluster.primary.leader()).url, token, 'PUT', '/v1/acl/token', { Policies: [{ ID: readerID }] });
      if (victim.status === 200) {
        const v = victim.body as { SecretID: string; AccessorID: string };
        deciders?.add(v.SecretID);
        await cluster.waitForReplication(60_000);
        const del = await call((await cluster.primary.leader()).url, token, 'DELETE', `/v1/acl/token/${v.AccessorID}`);
        if (del.status === 200) deciders?.deleted(v.SecretID, Date.now());
      }
    };
    const pass = async (name: string, dcs: string[], program: string | undefined) => {
      for (const s of await order(cluster, dcs))
        await restart(s, program, `${name}: ${s.serverName} to ${program ? PREVIOUS_RELEASE.version : VERSION}`);
    };

    await pass('upgrade, secondaries first', ['dc2', 'dc3', 'dc1'], undefined);
    await pass('rollback', ['dc1', 'dc2', 'dc3'], options.previous);
    await pass('upgrade, the primary first', ['dc1', 'dc2', 'dc3'], undefined);

    // dc3 alone back on the previous release: it serves every token it had.
    const dc3 = cluster.get('dc3');
    const held = await tokensAt(dc3.url, token);
    await restart(dc3, options.previous, 'rollback of dc3 alone');
    const after = await tokensAt(dc3.url, token);
    // A token gone from dc3 is missing unless the primary deleted it meanwhile (the load deletes global tokens as it goes).
    const missing: string[] = [];
    for (const id of held.filter((x) => !after.includes(x))) {
      const local = load.created.get(id)?.local === true;
      const atPrimary = local ? undefined : await call((await cluster.primary.leader()).url, token, 'GET', `/v1/acl/token/${id}`);
      if (local || atPrimary?.status !== 404) missing.push(id);
    }
    await restart(dc3, undefined, `dc3 to ${VERSION} again`);

    await load.stop();
    await deciders.stop();
    await cluster.waitForReplication(60_000);
    const leader = await cluster.primary.leader();
    await waitUntil(
      async () => ((await call(leader.url, token, 'GET', '/v1/operator/upgrade')).body as OperatorUpgradeResponse).CanFinalize,
      30_000,
    );
    const finalized = await call(leader.url, token, 'PUT', '/v1/operator/upgrade?finalize');
    if (finalized.status !== 200) throw new Error(`finalize: ${finalized.status} ${JSON.stringify(finalized.body)}`);

    // Every acknowledged write, where it lives.
    const lost: string[] = [];
    for (const [id, t] of load.created) {
      if (load.unsure.has(id) || load.deleted.has(id)) continue;
      const home = await cluster.get(t.local ? t.dc : 'dc1').leader();
      if ((await call(home.url, token, 'GET', `/v1/acl/token/${id}`)).status !== 200)
        lost.push(`${t.local ? 'Local' : 'global'} ${id} made at ${t.dc}`);
    }
    return {
      steps,
      lost,
      refusedOutsideElection: steps.filter((s) => !s.election).reduce((n, s) => n + s.refused, 0),
      anomalies: load.history.check().map((a) => describeAnomaly(a, started)),
      wrongDecisions: deciders.wrong,
      rolledBack: { datacenter: 'dc3', tokens: held.length, missing },
      finalized: (finalized.body as OperatorUpgradeResponse).Finalized,
      stuck,
      writes: { acknowledged: load.created.size, ambiguous: load.ambiguous },
      durationMs: Date.now() - started,
    };
  } finally {
    await load?.stop();
    await deciders?.stop().catch(() => undefined);
    if (options.logDir) {
      await mkdir(options.logDir, { recursive: true });
      for (const d of cluster.datacenters)
        for (const s of d.servers) await writeFile(join(options.logDir, `${s.serverName}.log`), s.output());
      await writeFile(
        join(options.logDir, 'refusals.log'),
        (load?.refusals ?? []).map((r) => `${new Date(r.at).toISOString()} ${r.what}`).join('\n'),
      );
    }
    await cluster.stop();
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
