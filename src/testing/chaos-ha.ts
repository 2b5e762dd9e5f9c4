/**
 * `npm run chaos` over highly available datacenters: the primary with 3 servers and etcd, a
 * secondary with 2 servers, a secondary with 1 (watchword/testing; links through cuttable
 * proxies). A continuous load writes global and Local tokens at every datacenter, deletes,
 * policies and roles, and logins; faults come in rotation; after each, the load pauses until
 * every running server of every datacenter holds the primary leader's global objects. Meanwhile
 * a revoker deletes tokens at the primary while readers in every datacenter keep using them,
 * and the time to the first 403 there is recorded. At the end every acknowledged write is
 * checked on every server. Every loop is bounded in count and time.
 */
import type { Anomaly } from './history.js';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SignJWT, exportSPKI, generateKeyPair } from 'jose';
import { type Cluster, type DatacenterHandle, startCluster } from './index.js';
import { type Revocation, Revoker, running } from './revoker.js';
import { DISK, DISK_SERVER, fillDisk, mountSmallDisk, unmountSmallDisk } from './small-disk.js';
import { Load, type State, type Writer, call, globalState, same, sleep } from './chaos.js';

export type HaFaultKind =
  | 'kill-leader'
  | 'kill-follower'
  | 'freeze-leader'
  | 'etcd-restart'
  | 'cut-leader-from-etcd'
  | 'cut-link'
  | 'kill-secondary-leader-in-catch-up'
  | 'kill-single-secondary'
  | 'full-disk-follower'
  | 'full-disk-leader';

export interface HaFaultResult {
  n: number;
  kind: HaFaultKind;
  target: string;
  heldMs: number;
  /** From undoing the fault until every server of every datacenter converged. */
  convergedMs: number;
  converged: boolean;
}

export type { Revocation };

export interface HaChaosReport {
  faults: HaFaultResult[];
  durationMs: number;
  writes: { acknowledged: number; ambiguous: number; deletes: number; logins: number };
  lost: string[];
  resurrected: string[];
  leaked: string[];
  bad: string[];
  revocations: Revocation[];
  /** Revocations whose 403 did not come within the bound (30 s). */
  revocationsMissed: string[];
  /** Servers whose global objects differed from the primary leader's at a full comparison (every tenth fault, and at the end). */
  diverged: string[];
  skipped: string[];
  /** What readers saw, checked (src/testing/history.ts). */
  history: { operations: number; anomalies: Anomaly[] };
}

export interface HaChaosOptions {
  faults?: number;
  log?: (line: string) => void;
  /** Where to write each server's output at the end (its log lines). */
  logDir?: string;
  convergeTimeoutMs?: number;
}

const DATACENTERS = ['dc1', 'dc2', 'dc3'] as const;
const ROTATION: Array<[HaFaultKind, string]> = [
  ['kill-leader', 'dc1'],
  ['cut-link', 'dc2'],
  ['kill-follower', 'dc1'],
  ['freeze-leader', 'dc1'],
  ['kill-single-secondary', 'dc3'],
  ['etcd-restart', 'etcd'],
  ['kill-secondary-leader-in-catch-up', 'dc2'],
  ['cut-leader-from-etcd', 'dc1'],
  ['cut-link', 'dc3'],
  ['kill-leader', 'dc2'],
  ['full-disk-follower', 'dc1-server-3'],
  // Then the rotation's first fault kills that leader, its disk freed a moment before.
  ['full-disk-leader', 'dc1-server-3'],
];

/** The continuous mixed load, with what it was told. */
/** The load over HA datacenters: every running server of a datacenter in turn, logins too. */
class HaLoad extends Load {
  logins = 0;
  private turn = 0;

  constructor(
    cluster: Cluster,
    token: string,
    private readonly jwt: () => Promise<string>,
  ) {
    super(cluster, token, 25);
  }

  /** A running server of the datacenter, in turn (followers send writes on to their leader). */
  override url(dc: string): string {
    const servers = running(this.cluster.get(dc));
    const s = servers[this.turn++ % Math.max(1, servers.length)] ?? this.cluster.get(dc);
    return s.url;
  }

  private login(dc: string): () => Promise<void> {
    return async () => {
      const a = await call(this.url(dc), '', 'POST', '/v1/acl/login', { AuthMethod: 'chaos', BearerToken: await this.jwt() });
      if (this.judge(`login at ${dc}`, a)) {
        this.logins++;
        this.created.set((a.body as { AccessorID: string }).AccessorID, { dc, local: true });
      }
    };
  }

  protected override writers(): Writer[] {
    return [
      { run: this.create('dc1', false) },
      { run: this.create('dc2', false) },
      { run: this.create('dc3', false) },
      { run: this.create('dc1', true) },
      { run: this.create('dc2', true) },
      { run: this.create('dc3', true) },
      { run: this.remove },
      { run: this.policyAndRole(false) },
      // Within the default login limit of 10 a second per client.
      { run: this.login('dc2'), pauseMs: 150 },
      { run: this.reader('dc1', 'consistent') },
      { run: this.reader('dc1', 'secret') },
      { run: this.reader('dc2', 'default') },
      { run: this.reader('dc2', 'consistent') },
      { run: this.reader('dc3', 'default') },
    ];
  }
}

/** One server's own global objects (?stale: what it holds, not its leader's) as id -> Hash. */
const serverState = (url: string, token: string): Promise<State | undefined> => globalState(url, token, { stale: true, timeoutMs: 60_000 });

/** A server's durable index ({Index} of /v1/internal/index), or undefined when it does not answer. */
async function indexOf(url: string, token: string): Promise<number | undefined> {
  const a = await call(url, token, 'GET', '/v1/internal/index', undefined, 3000);
  return a.status === 200 ? (a.body as { Index: number }).Index : undefined;
}

/**
 * Converged: every server of every datacenter runs; every secondary has replicated the
 * primary's index of the moment and is connected; inside each datacenter every server has
 * applied its leader's index. Positions, not lists: the check costs the same at 100 tokens as
 * at 100,000 (the full comparison of every server's objects runs every tenth fault and at the end).
 */
async function converge(cluster: Cluster, token: string, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const ok = await (async () => {
      if (cluster.datacenters.some((d) => d.servers.some((s) => s.pid === undefined))) return false;
      const leader = await cluster.primary.leader(2000).catch(() => undefined);
      if (!leader) return false;
      const target = await indexOf(leader.url, token);
      if (target === undefined) return false;
      for (const d of cluster.datacenters) {
        if (!d.isPrimary) {
          const status = await call(d.url, token, 'GET', '/v1/acl/replication', undefined, 3000);
          const body = status.body as { Connected?: boolean; ReplicatedIndex?: number } | undefined;
          if (status.status !== 200 || !body?.Connected || (body.ReplicatedIndex ?? 0) < target) return false;
        }
        const dcLeader = d.servers.length > 1 ? await d.leader(2000).catch(() => undefined) : d;
        if (!dcLeader) return false;
        const local = await indexOf(dcLeader.url, token);
        if (local === undefined) return false;
        for (const s of d.servers) if (((await indexOf(s.url, token)) ?? -1) < local) return false;
      }
      return true;
    })();
    if (ok) return true;
    await sleep(50);
  }
  return false;
}

/**
 * Every server's global objects equal the primary leader's (lists of everything: slow on a
 * large store). The revoker keeps writing meanwhile, so a server found different is compared
 * again (up to 10 times, 300 ms apart): a change in flight settles, a divergence stays.
 */
async function sameEverywhere(cluster: Cluster, token: string): Promise<string[]> {
  let out: string[] = [];
  for (let attempt = 0; attempt < 10; attempt++) {
    const leader = await cluster.primary.leader();
    const primary = await serverState(leader.url, token);
    out = primary ? [] : [`${leader.serverName} did not list its objects`];
    for (const d of cluster.datacenters) {
      for (const s of d.servers)
        if (primary && !same(await serverState(s.url, token), primary))
          out.push(`${s.serverName} holds other global objects than the primary's leader`);
    }
    if (out.length === 0) return out;
    await sleep(300);
  }
  return out;
}

async function inject(cluster: Cluster, kind: HaFaultKind, target: string): Promise<{ heldMs: number; target: string }> {
  const held = Date.now();
  const named = (await FAULTS[kind](cluster, target)) ?? target;
  return { heldMs: Date.now() - held, target: named };
}

/** Kills a server, and starts it again after a while. */
async function bounce(server: { kill(): Promise<unknown>; start(): Promise<unknown> }, downMs = 1500): Promise<void> {
  await server.kill();
  await sleep(downMs);
  await server.start();
}

/** Each fault, held for its while and then healed; returns the server it hit, when it names one. */
const FAULTS: Record<HaFaultKind, (cluster: Cluster, target: string) => Promise<string | undefined>> = {
  'kill-leader': async (cluster, target) => {
    const leader = await cluster.get(target).leader();
    await bounce(leader);
    return leader.serverName;
  },
  'kill-follower': async (cluster, target) => {
    const leader = await cluster.get(target).leader();
    const follower = running(cluster.get(target)).find((s) => s !== leader) as DatacenterHandle;
    await bounce(follower);
    return follower.serverName;
  },
  'freeze-leader': async (cluster, target) => {
    const leader = await cluster.get(target).leader();
    process.kill(leader.pid as number, 'SIGSTOP');
    // Past the 5 s lease: another server takes over meanwhile.
    await sleep(7000);
    process.kill(leader.pid as number, 'SIGCONT');
    return leader.serverName;
  },
  'etcd-restart': async (cluster) => {
    const etcd = cluster.coordinator;
    if (!etcd) throw new Error('no etcd');
    await bounce(etcd, 4000);
    return undefined;
  },
  'cut-leader-from-etcd': async (cluster, target) => {
    const leader = await cluster.get(target).leader();
    const link = cluster.coordinatorLink(leader.serverName);
    link.cut();
    await sleep(7000);
    link.restore();
    return leader.serverName;
  },
  'cut-link': async (cluster, target) => {
    cluster.link(target).cut();
    await sleep(4000);
    cluster.link(target).restore();
    return undefined;
  },
  'kill-secondary-leader-in-catch-up': async (cluster, target) => {
    // Cut off while the load writes, so that it has a backlog; killed as soon as it reconnects.
    cluster.link(target).cut();
    await sleep(2500);
    cluster.link(target).restore();
    const leader = await cluster.get(target).leader();
    await sleep(100);
    await bounce(leader);
    return leader.serverName;
  },
  'full-disk-follower': async (cluster) => {
    const server = cluster.get('dc1').servers.find((x) => x.serverName === DISK_SERVER) as DatacenterHandle;
    const leader = await cluster.get('dc1').leader();
    await fullDiskFor(4000);
    return leader === server ? `${server.serverName} (leading then)` : server.serverName;
  },
  'full-disk-leader': async (cluster) => {
    // The server on the small disk is made the leader (its leaders killed until it leads), then its disk fills.
    const d = cluster.get('dc1');
    const server = d.servers.find((x) => x.serverName === DISK_SERVER) as DatacenterHandle;
    for (let tries = 0; tries < 8 && (await d.leader(20_000)) !== server; tries++) {
      await bounce(await d.leader(20_000), 500);
      await d.leader(20_000);
      await sleep(2500); // the restarted server back in the synchronous set, so it may lead next
    }
    const leads = (await d.leader(20_000)) === server;
    await fullDiskFor(4000);
    return leads ? `${server.serverName} (leading)` : `${server.serverName} (could not make it lead; a follower)`;
  },
  'kill-single-secondary': async (cluster, target) => {
    await bounce(cluster.get(target));
    return undefined;
  },
};

async function fullDiskFor(ms: number): Promise<void> {
  const free = await fillDisk();
  await sleep(ms);
  await free();
}

/** A JWT auth method with a static key and a binding rule, for the logins of the load. */
export async function authMethod(cluster: Cluster, token: string): Promise<() => Promise<string>> {
  const { publicKey, privateKey } = await generateKeyPair('RS256', { extractable: true });
  const pem = await exportSPKI(publicKey);
  const leader = await cluster.primary.leader();
  const method = await call(leader.url, token, 'PUT', '/v1/acl/auth-method', {
    Name: 'chaos',
    Type: 'jwt',
    Config: { JWTValidationPubKeys: [pem], BoundIssuer: 'chaos', ClaimMappings: { service: 'service' } },
  });
  if (method.status !== 200) throw new Error(`auth method: ${method.status} ${JSON.stringify(method.body)}`);
  const rule = await call(leader.url, token, 'PUT', '/v1/acl/binding-rule', {
    AuthMethod: 'chaos',
    BindType: 'service',
    BindName: '${value.service}',
  });
  if (rule.status !== 200) throw new Error(`binding rule: ${rule.status} ${JSON.stringify(rule.body)}`);
  return () =>
    new SignJWT({ service: 'web' })
      .setProtectedHeader({ alg: 'RS256' })
      .setIssuer('chaos')
      .setIssuedAt()
      .setExpirationTime('10m')
      .sign(privateKey);
}

export async function runHaChaos(options: HaChaosOptions = {}): Promise<HaChaosReport> {
  const total = options.faults ?? 100;
  const log = options.log ?? (() => undefined);
  const started = Date.now();
  const diskSkipped = await mountSmallDisk();
  const cluster = await startCluster({
    datacenters: { dc1: { servers: 3 }, dc2: { servers: 2 }, dc3: { servers: 1 } },
    links: true,
    timings: 'production',
    // CHAOS_LOG_LEVEL=info keeps each server's leadership and stream notes (written to logDir at the end).
    logLevel: (process.env.CHAOS_LOG_LEVEL as 'error' | 'warn' | 'info' | 'debug' | undefined) ?? 'error',
    ...(diskSkipped ? {} : { dataDirParent: { [DISK_SERVER]: DISK } }),
  });
  const token = cluster.managementToken;
  const faults: HaFaultResult[] = [];
  const diverged: string[] = [];
  const skipped = diskSkipped ? [diskSkipped] : [];
  let load: HaLoad | undefined;
  const revoker = new Revoker(cluster, token, DATACENTERS);
  try {
    await cluster.waitForReplication();
    const jwt = await authMethod(cluster, token);
    await cluster.waitForReplication();
    load = new HaLoad(cluster, token, jwt);
    // At rest first: revocations with nothing failing.
    revoker.start();
    await sleep(8000);
    // CHAOS_KINDS=a,b narrows the rotation to those kinds, in the rotation's order (to chase one failure).
    const kinds = process.env.CHAOS_KINDS?.split(',').map((k) => k.trim());
    const rotation = ROTATION.filter(([k]) => !(diskSkipped && k.startsWith('full-disk')) && (!kinds || kinds.includes(k)));
    if (rotation.length === 0) throw new Error(`CHAOS_KINDS names no fault kind of ${[...new Set(ROTATION.map(([k]) => k))].join(', ')}`);
    for (let n = 1; n <= total; n++) {
      const [kind, target] = rotation[(n - 1) % rotation.length] as [HaFaultKind, string];
      load.start();
      revoker.fault = 'load';
      await sleep(1000);
      revoker.fault = `${kind} ${target}`;
      const injected = await inject(cluster, kind, target);
      const undone = Date.now();
      await load.stop();
      const converged = await converge(cluster, token, options.convergeTimeoutMs ?? 60_000);
      // Measured here: the pause at rest below is not part of it.
      const convergedMs = Date.now() - undone;
      revoker.fault = undefined;
      // At rest for a moment (nothing failing, no load): revocations then are the at-rest figure.
      await sleep(1000);
      const result = { n, kind, target: injected.target, heldMs: injected.heldMs, convergedMs, converged };
      faults.push(result);
      log(
        `fault ${n}/${total}: ${kind} ${injected.target}, held ${(injected.heldMs / 1000).toFixed(1)} s, ` +
          `${converged ? `converged in ${(result.convergedMs / 1000).toFixed(2)} s` : 'DID NOT CONVERGE'}`,
      );
      if (!converged) break;
      if (n % 10 === 0) {
        // The revoker pauses: lists of every object take seconds on a large store, and its writes would race them.
        await revoker.stop();
        diverged.push(...(await sameEverywhere(cluster, token)).map((x) => `after fault ${n}: ${x}`));
        revoker.start();
      }
    }
    await revoker.stop();
    diverged.push(...(await sameEverywhere(cluster, token)).map((x) => `at the end: ${x}`));

    const { lost, resurrected, leaked } = await checkWrites(cluster, token, load);
    return {
      faults,
      durationMs: Date.now() - started,
      writes: { acknowledged: load.created.size, ambiguous: load.ambiguous, deletes: load.deleted.size, logins: load.logins },
      lost,
      resurrected,
      leaked,
      bad: load.bad,
      revocations: revoker.revocations,
      revocationsMissed: revoker.missed,
      diverged,
      skipped,
      history: { operations: load.history.ops.length, anomalies: load.history.check() },
    };
  } finally {
    await revoker.stop();
    await load?.stop();
    if (options.logDir) {
      // What each server said during the run, kept for the post-mortem of a failed check.
      await mkdir(options.logDir, { recursive: true });
      for (const d of cluster.datacenters)
        for (const s of d.servers) await writeFile(join(options.logDir, `${s.serverName}.log`), s.output());
    }
    await cluster.stop();
    if (!diskSkipped) unmountSmallDisk();
  }
}

/**
 * Every acknowledged write on every server (each server's own state, ?stale): lost, back from
 * deletion, or where it does not belong.
 */
async function checkWrites(
  cluster: Cluster,
  token: string,
  load: HaLoad,
): Promise<{ lost: string[]; resurrected: string[]; leaked: string[] }> {
  const lost: string[] = [];
  const resurrected: string[] = [];
  const leaked: string[] = [];
  for (const d of cluster.datacenters) {
    for (const s of d.servers) {
      const a = await call(s.url, token, 'GET', '/v1/acl/tokens?ns=*&stale', undefined, 30_000);
      if (a.status !== 200) {
        lost.push(`${s.serverName} did not answer its token list (${a.status})`);
        continue;
      }
      const held = new Set((a.body as Array<{ AccessorID: string }>).map((t) => t.AccessorID));
      for (const [id, t] of load.created) {
        if (load.unsure.has(id)) continue;
        const belongs = !t.local || t.dc === d.name;
        if (load.deleted.has(id)) {
          if (held.has(id)) resurrected.push(`${id} at ${s.serverName}`);
        } else if (belongs && !held.has(id)) {
          // Missing from the list: is it gone, or only not listed? (The first few are read one by one.)
          const read =
            lost.length < 20 ? (await call(s.url, token, 'GET', `/v1/acl/token/${id}?stale`, undefined, 5000)).status : undefined;
          const how = read === undefined ? '' : read === 200 ? ' (not listed, but readable: 200)' : ` (read: ${read})`;
          lost.push(`${t.local ? 'Local' : 'global'} token ${id} made at ${t.dc}, missing at ${s.serverName}${how}`);
        } else if (!belongs && held.has(id)) {
          leaked.push(`${id} of ${t.dc} seen at ${s.serverName}`);
        }
      }
    }
  }
  return { lost, resurrected, leaked };
}
