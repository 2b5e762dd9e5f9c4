import type { Etcd3, Lease } from 'etcd3';
import type { Logger } from 'pino';
import { WatchwordError } from '../domain/errors.js';

/** A server of the datacenter, as the coordinator knows it. */
export interface ServerInfo {
  name: string;
  /** HTTP address, host:port. */
  address: string;
}

export interface LeaderInfo extends ServerInfo {
  /** Leadership term: grows with every new leader. */
  term: number;
}

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
  logger: Logger;
}

interface SyncRecord {
  leader: string;
  term: number;
  members: string[];
}

/**
 * Election through etcd: a lease kept alive by this server, a leader key created only
 * if absent and bound to the lease (its create revision is the term), and a sync key
 * naming the synchronous set. Only the previous leader or a member of its synchronous
 * set may take the leader key, checked in the same transaction that takes it.
 *
 * Fencing: the lease is valid until `TTL` after the last keep-alive that etcd confirmed
 * was *sent*; etcd cannot expire it earlier. This server stops acknowledging a second
 * before that, so it stops before anyone else can win.
 */
export class EtcdCoordinator implements Coordinator {
  /** Loaded in start(): the etcd client (gRPC) costs a quarter of a second to load, which no other command should pay. */
  private client!: Etcd3;
  private lease: Lease | undefined;
  private leaseID: string | undefined;
  private validUntil = 0;
  private current: LeaderInfo | undefined;
  private leaderLease: string | undefined;
  private sync: SyncRecord | undefined;
  private known: ServerInfo[] = [];
  private readonly listeners = new Set<() => void>();
  private timer: NodeJS.Timeout | undefined;
  private keepalive: NodeJS.Timeout | undefined;
  private stopped = false;
  private polling = false;
  private lastError = '';
  private readonly prefix: string;
  /** Margin kept before the lease's end, ms. */
  private readonly margin: number;

  constructor(private readonly options: EtcdOptions) {
    this.prefix = `/watchword/${options.datacenter}/`;
    this.margin = Math.min(1000, (options.leaseTTL * 1000) / 5);
  }

  private key(name: string): string {
    return this.prefix + name;
  }

  async start(): Promise<void> {
    const [{ Etcd3 }, { noop }] = await Promise.all([import('etcd3'), import('cockatiel')]);
    this.client = new Etcd3({
      hosts: this.options.endpoints,
      dialTimeout: 2000,
      defaultCallOptions: () => ({ deadline: Date.now() + 2000 }),
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
    return this.current;
  }

  isLeader(): boolean {
    return this.current?.name === this.options.self.name && this.leaderLease === this.leaseID && this.leaseValid();
  }

  private leaseValid(): boolean {
    return this.leaseID !== undefined && Date.now() < this.validUntil - this.margin;
  }

  checkLeadership(): void {
    if (this.isLeader()) return;
    const why = !this.leaseValid() ? 'its lease in the coordinator lapsed' : `the leader is ${this.current?.name ?? 'unknown'}`;
    throw new WatchwordError('NO_LEADER', `this server may not acknowledge writes: ${why}`);
  }

  syncSet(): string[] {
    return [...(this.sync?.members ?? [])];
  }

  servers(): ServerInfo[] {
    return [...this.known];
  }

  problem(): string | undefined {
    return this.lastError || undefined;
  }

  onChange(listener: () => void): void {
    this.listeners.add(listener);
  }

  async publishSync(members: string[]): Promise<void> {
    const term = this.current?.term ?? 0;
    if (!this.isLeader() || this.leaseID === undefined) throw new WatchwordError('NO_LEADER', 'not the leader: cannot publish the synchronous set');
    const record: SyncRecord = { leader: this.options.self.name, term, members };
    const res = await this.client
      .if(this.key('leader'), 'Lease', '==', this.leaseID)
      .then(this.client.put(this.key('sync')).value(JSON.stringify(record)))
      .commit();
    if (!res.succeeded) throw new WatchwordError('NO_LEADER', 'leadership was lost while publishing the synchronous set');
    this.sync = record;
  }

  /** Keeps the lease alive; a keep-alive confirmed by etcd extends validity from when it was sent. */
  private async renew(): Promise<void> {
    const lease = this.lease;
    if (!lease || this.stopped) return;
    const sent = Date.now();
    try {
      const res = await lease.keepaliveOnce({ deadline: sent + 1500 });
      const ttl = Number(res.TTL);
      if (ttl > 0) this.validUntil = Math.max(this.validUntil, sent + ttl * 1000);
      else this.loseLease('etcd says the lease expired');
    } catch (err) {
      this.lastError = `cannot reach etcd: ${(err as Error).message}`;
      if (Date.now() >= this.validUntil) this.loseLease(this.lastError);
    }
    if (this.lease && Date.now() >= this.validUntil - this.margin) this.changed();
  }

  private loseLease(why: string): void {
    if (!this.lease) return;
    this.options.logger.warn(`coordinator: lease lost (${why})`);
    this.lease.release();
    this.lease = undefined;
    this.leaseID = undefined;
    this.validUntil = 0;
    this.changed();
  }

  private async ensureLease(): Promise<void> {
    if (this.lease) return;
    const lease = this.client.lease(this.options.leaseTTL, { autoKeepAlive: false });
    lease.on('lost', () => undefined);
    const sent = Date.now();
    const id = await lease.grant();
    this.lease = lease;
    this.leaseID = id;
    this.validUntil = sent + this.options.leaseTTL * 1000;
    await lease.put(this.key(`servers/${this.options.self.name}`)).value(JSON.stringify(this.options.self));
  }

  /** Reads the election state, and campaigns when there is no leader and this server may take over. */
  private async poll(): Promise<void> {
    if (this.polling || this.stopped) return;
    this.polling = true;
    try {
      await this.ensureLease();
      const res = await this.client.getAll().prefix(this.prefix).exec();
      let leaderKV: (typeof res.kvs)[number] | undefined;
      let syncKV: (typeof res.kvs)[number] | undefined;
      const servers: ServerInfo[] = [];
      for (const kv of res.kvs) {
        const k = kv.key.toString();
        if (k === this.key('leader')) leaderKV = kv;
        else if (k === this.key('sync')) syncKV = kv;
        else if (k.startsWith(this.key('servers/'))) servers.push(JSON.parse(kv.value.toString()) as ServerInfo);
      }
      this.known = servers.sort((a, b) => a.name.localeCompare(b.name));
      this.sync = syncKV ? (JSON.parse(syncKV.value.toString()) as SyncRecord) : undefined;
      const before = this.current;
      const beforeLease = this.leaderLease;
      if (leaderKV) {
        this.current = { ...(JSON.parse(leaderKV.value.toString()) as ServerInfo), term: Number(leaderKV.create_revision) };
        this.leaderLease = String(leaderKV.lease);
      } else {
        this.current = undefined;
        this.leaderLease = undefined;
        await this.campaign(syncKV?.mod_revision);
      }
      this.lastError = '';
      if (before?.term !== this.current?.term || before?.name !== this.current?.name || beforeLease !== this.leaderLease) this.changed();
    } catch (err) {
      this.lastError = `cannot reach etcd: ${(err as Error).message}`;
    } finally {
      this.polling = false;
    }
  }

  private async campaign(syncRevision: string | undefined): Promise<void> {
    const me = this.options.self.name;
    const sync = this.sync;
    if (sync && sync.leader !== me && !sync.members.includes(me)) return;
    if (!this.leaseValid() || this.leaseID === undefined) return;
    const res = await this.client
      .if(this.key('leader'), 'Create', '==', 0)
      .and(this.key('sync'), 'Mod', '==', syncRevision ?? 0)
      .then(this.client.put(this.key('leader')).value(JSON.stringify(this.options.self)).lease(this.leaseID))
      .commit();
    if (!res.succeeded) return;
    const term = Number(res.header.revision);
    this.current = { ...this.options.self, term };
    this.leaderLease = this.leaseID;
    this.options.logger.info({ term }, 'coordinator: won the election; this server leads');
    // Until followers catch up, this server alone holds every acknowledged write.
    await this.publishSync([]);
  }

  private changed(): void {
    for (const l of this.listeners) l();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    clearInterval(this.keepalive);
    const lease = this.lease;
    this.lease = undefined;
    this.leaseID = undefined;
    this.validUntil = 0;
    // Revoking the lease removes the leader key at once: a successor need not wait for it to lapse.
    if (lease) await lease.revoke().catch(() => undefined);
    this.client?.close();
  }
}
