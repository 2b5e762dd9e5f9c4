import type { Etcd3, Lease } from 'etcd3';
import type { Logger } from 'pino';
import { WatchwordError } from '../domain/errors.js';
import { Election, type ElectionView, type EtcdStep, type LeaderInfo, type ServerInfo, type SyncRecord } from './election.js';

export type { LeaderInfo, ServerInfo } from './election.js';

/**
 * Who leads a datacenter (SPEC §13). The etcd coordinator runs an election on a lease;
 * the static one names the first of `--server-peers` for good.
 */
export interface Coordinator {
  start(): Promise<void>;
  /** The current leader as last seen, if any. */
  leader(): LeaderInfo | undefined;
  isLeader(): boolean;
  /** Throws NO_LEADER unless this server leads and may still acknowledge writes (fencing). */
  checkLeadership(): void;
  /** Records the synchronous set before the leader relies on it. */
  publishSync(members: string[]): Promise<void>;
  /** The synchronous set as last published. */
  syncSet(): string[];
  servers(): ServerInfo[];
  /** Told whenever the leader (or this server's part) changes. */
  onChange(listener: () => void): void;
  /** Why the coordinator cannot be used now, if it cannot. */
  problem(): string | undefined;
  /** Steps down (if leading) and stops. */
  stop(): Promise<void>;
}

/** No coordinator: the first of the configured servers leads, in term 1. */
export class StaticCoordinator implements Coordinator {
  private sync: string[] = [];
  constructor(
    private readonly self: ServerInfo,
    private readonly peers: ServerInfo[],
  ) {}

  async start(): Promise<void> {}
  leader(): LeaderInfo | undefined {
    const first = this.peers[0] ?? this.self;
    return { ...first, term: 1 };
  }
  isLeader(): boolean {
    return this.leader()?.name === this.self.name;
  }
  checkLeadership(): void {
    if (!this.isLeader()) throw new WatchwordError('NO_LEADER', `this server is not the leader (${this.leader()?.name})`);
  }
  async publishSync(members: string[]): Promise<void> {
    this.sync = members;
  }
  syncSet(): string[] {
    return [...this.sync];
  }
  servers(): ServerInfo[] {
    return this.peers.length > 0 ? this.peers : [this.self];
  }
  onChange(): void {}
  problem(): string | undefined {
    return undefined;
  }
  async stop(): Promise<void> {}
}

export interface EtcdOptions {
  /** etcd endpoints, http://host:port. */
  endpoints: string[];
  datacenter: string;
  self: ServerInfo;
  /** Lease time to live, seconds (default 5). */
  leaseTTL: number;
  /** How often the election state is read, ms. */
  pollMs: number;
  /** etcd over TLS: the CA its certificate is checked against, and this server's client certificate. */
  credentials?: { rootCertificate?: Buffer; certChain?: Buffer; privateKey?: Buffer };
  /** etcd auth. */
  auth?: { username: string; password: string };
  logger: Logger;
}

/** Per-call deadline for etcd, ms: a call that hangs must not hold the loop past a lease. */
const CALL_MS = 2000;

/**
 * The election's shell: the etcd client, the timers, and the calls the decisions in
 * `election.ts` ask for. Keys: a lease kept alive by this server, a leader key created only
 * if absent and bound to the lease (its create revision is the term), a sync key naming
 * the synchronous set, and a registration per server.
 *
 * Fencing: the lease is valid until `TTL` after the last keep-alive that etcd confirmed
 * was *sent*; etcd cannot expire it earlier. This server stops acknowledging a margin
 * before that, so it stops before anyone else can win; and the lease is then retired
 * (resigned and revoked as soon as etcd answers), never kept alive again.
 */
export class EtcdCoordinator implements Coordinator {
  /** Loaded in start(): the etcd client (gRPC) costs a quarter of a second to load, which no other command should pay. */
  private client!: Etcd3;
  private readonly election: Election;
  /** The client-side lease object of each lease this server granted, for keep-alives. */
  private readonly leaseObjects = new Map<string, Lease>();
  private readonly listeners = new Set<() => void>();
  private timer: NodeJS.Timeout | undefined;
  private keepalive: NodeJS.Timeout | undefined;
  private stopped = false;
  private polling = false;
  /** What the listeners were last told: leader, term and whether this server leads. */
  private told = '';
  private readonly prefix: string;

  constructor(private readonly options: EtcdOptions) {
    this.prefix = `/watchword/${options.datacenter}/`;
    const leaseMs = options.leaseTTL * 1000;
    this.election = new Election({ self: options.self, leaseMs, marginMs: Math.min(1000, leaseMs / 5) });
  }

  private key(name: string): string {
    return this.prefix + name;
  }

  async start(): Promise<void> {
    const [{ Etcd3 }, { noop }] = await Promise.all([import('etcd3'), import('cockatiel')]);
    this.client = new Etcd3({
      hosts: this.options.endpoints,
      // Without a CA of its own, grpc checks etcd's certificate against the system's roots.
      ...(this.options.credentials ? { credentials: this.options.credentials as { rootCertificate: Buffer } } : {}),
      ...(this.options.auth ? { auth: this.options.auth } : {}),
      dialTimeout: CALL_MS,
      defaultCallOptions: () => ({ deadline: Date.now() + CALL_MS }),
      // Calls fail fast and are retried by the election loop, not held behind a circuit breaker.
      faultHandling: { host: () => noop, global: noop },
    });
    await this.poll();
    this.timer = setInterval(() => void this.poll(), this.options.pollMs);
    this.timer.unref();
    this.keepalive = setInterval(() => void this.renew(), Math.max(200, (this.options.leaseTTL * 1000) / 5));
    this.keepalive.unref();
  }

  leader(): LeaderInfo | undefined {
    return this.election.leader(Date.now());
  }

  isLeader(): boolean {
    return this.election.isLeader(Date.now());
  }

  checkLeadership(): void {
    const now = Date.now();
    if (this.election.isLeader(now)) return;
    throw new WatchwordError('NO_LEADER', `this server may not acknowledge writes: ${this.election.whyNotLeader(now)}`);
  }

  syncSet(): string[] {
    return [...(this.election.syncRecord()?.members ?? [])];
  }

  servers(): ServerInfo[] {
    return this.election.servers();
  }

  problem(): string | undefined {
    return this.election.problem();
  }

  onChange(listener: () => void): void {
    this.listeners.add(listener);
  }

  async publishSync(members: string[]): Promise<void> {
    const leader = this.leader();
    const lease = this.election.currentLease();
    if (!this.isLeader() || lease === undefined || !leader) throw new WatchwordError('NO_LEADER', 'not the leader: cannot publish the synchronous set');
    const record: SyncRecord = { leader: this.options.self.name, term: leader.term, members };
    const res = await this.client
      .if(this.key('leader'), 'Lease', '==', lease)
      .then(this.client.put(this.key('sync')).value(JSON.stringify(record)))
      .commit();
    if (!res.succeeded) throw new WatchwordError('NO_LEADER', 'leadership was lost while publishing the synchronous set');
    this.election.syncPublished(record, res.header.revision);
  }

  /** Keeps the current lease alive; a keep-alive confirmed by etcd extends validity from when it was sent. */
  private async renew(): Promise<void> {
    if (this.stopped) return;
    const id = this.election.currentLease();
    const lease = id === undefined ? undefined : this.leaseObjects.get(id);
    if (id !== undefined && lease) {
      const sent = Date.now();
      try {
        const res = await lease.keepaliveOnce({ deadline: sent + 1500 });
        this.election.keptAlive(id, sent, Number(res.TTL) * 1000);
      } catch (err) {
        this.election.failed(messageOf(err), Date.now());
      }
    }
    this.election.tick(Date.now());
    this.settle();
  }

  /** One round of the election: resign what must go, hold a lease, read, register, campaign. */
  private async poll(): Promise<void> {
    if (this.polling || this.stopped) return;
    this.polling = true;
    try {
      this.election.beginRound(Date.now());
      // A round has few steps (resign, grant, read, register, resign, read, campaign); the bound only guards a loop.
      for (let i = 0; i < 10 && !this.stopped; i++) {
        const step = this.election.next(Date.now());
        if (step.kind === 'idle') break;
        await this.perform(step);
      }
    } catch (err) {
      this.election.failed(messageOf(err), Date.now());
    } finally {
      this.polling = false;
      this.settle();
    }
  }

  private async perform(step: Exclude<EtcdStep, { kind: 'idle' }>): Promise<void> {
    switch (step.kind) {
      case 'resign': {
        await this.client.if(this.key('leader'), 'Lease', '==', step.lease).then(this.client.delete().key(this.key('leader'))).commit();
        await this.revoke(step.lease);
        this.election.resigned(step.lease);
        return;
      }
      case 'grant': {
        const lease = this.client.lease(this.options.leaseTTL, { autoKeepAlive: false });
        lease.on('lost', () => undefined);
        const sent = Date.now();
        const id = await lease.grant();
        this.leaseObjects.set(id, lease);
        this.election.granted(id, sent);
        return;
      }
      case 'read': {
        const res = await this.client.getAll().prefix(this.prefix).exec();
        const view: ElectionView = { servers: [] };
        for (const kv of res.kvs) {
          const k = kv.key.toString();
          const lease = String(kv.lease);
          if (k === this.key('leader')) view.leader = { server: parseServer(kv.value), term: Number(kv.create_revision), lease, revision: String(kv.mod_revision) };
          else if (k === this.key('sync')) view.sync = { record: parseSync(kv.value), revision: String(kv.mod_revision) };
          else if (k.startsWith(this.key('servers/'))) view.servers.push({ ...parseServer(kv.value), lease });
        }
        this.election.observed(view, Date.now());
        return;
      }
      case 'clear': {
        await this.client.if(this.key('leader'), 'Mod', '==', step.revision).then(this.client.delete().key(this.key('leader'))).commit();
        this.election.cleared();
        return;
      }
      case 'register': {
        await this.client.put(this.key(`servers/${this.options.self.name}`)).value(JSON.stringify(this.options.self)).lease(step.lease);
        this.election.registered(step.lease);
        return;
      }
      case 'campaign': {
        const res = await this.client
          .if(this.key('leader'), 'Create', '==', 0)
          .and(this.key('sync'), 'Mod', '==', step.syncRevision ?? 0)
          .then(this.client.put(this.key('leader')).value(JSON.stringify(this.options.self)).lease(step.lease))
          .commit();
        this.election.campaigned(step.lease, res.succeeded, Number(res.header.revision));
        // Until followers catch up, this server alone holds every acknowledged write.
        if (res.succeeded) await this.publishSync([]);
        return;
      }
    }
  }

  /** Revokes a lease (removing every key on it); one etcd no longer knows is as good as revoked. */
  private async revoke(id: string): Promise<void> {
    const lease = this.leaseObjects.get(id);
    this.leaseObjects.delete(id);
    lease?.release();
    try {
      await this.client.leaseClient.leaseRevoke({ ID: id });
    } catch (err) {
      if (!/lease not found/i.test(messageOf(err))) throw err;
    }
  }

  /** Logs what the election did, and tells the listeners when the leader, the term or this server's part changed. */
  private settle(): void {
    for (const note of this.election.takeNotes()) this.options.logger.info(`coordinator: ${note}`);
    const l = this.leader();
    const now = `${l?.name ?? ''}|${l?.term ?? 0}|${this.isLeader()}`;
    if (now === this.told) return;
    this.told = now;
    for (const listener of this.listeners) listener();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    clearInterval(this.keepalive);
    // A round in flight ends after its current call (each has a deadline).
    for (const until = Date.now() + CALL_MS; this.polling && Date.now() < until; ) await new Promise((r) => setTimeout(r, 10));
    // Revoking a lease removes the leader key on it at once: a successor need not wait for it to lapse.
    await Promise.all(this.election.leases().map((id) => this.revoke(id).catch(() => undefined)));
    this.client?.close();
  }
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A server's registration or the leader key's value; what does not parse names nobody (and is then no leader). */
function parseServer(value: Buffer): ServerInfo {
  try {
    const v = JSON.parse(value.toString()) as Partial<ServerInfo>;
    return { name: typeof v.name === 'string' ? v.name : '', address: typeof v.address === 'string' ? v.address : '' };
  } catch {
    return { name: '', address: '' };
  }
}

/**
 * The synchronous set. One that does not parse names nobody: no server may take over until
 * an operator repairs it, which is safer than letting a server that may lack acknowledged
 * writes lead.
 */
function parseSync(value: Buffer): SyncRecord {
  try {
    const v = JSON.parse(value.toString()) as Partial<SyncRecord>;
    return { leader: typeof v.leader === 'string' ? v.leader : '', term: Number(v.term) || 0, members: Array.isArray(v.members) ? v.members.filter((m): m is string => typeof m === 'string') : [] };
  } catch {
    return { leader: '', term: 0, members: [] };
  }
}
