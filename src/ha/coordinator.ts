import type { Logger } from 'pino';
import { WatchwordError } from '../domain/errors.js';
import { Election, type EtcdStep, type LeaderInfo, planHandOver, type ServerInfo, type SyncRecord } from './election.js';
import { CALL_MS, type ElectionClient, Etcd3ElectionClient, messageOf } from './etcd-client.js';

export type { LeaderInfo, ServerInfo } from './election.js';

/**
 * Who leads a datacenter (docs/servers.md, "Several servers per datacenter"). The etcd coordinator runs an election on a lease;
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
  /**
   * Every server this one has seen registered since it started, live or not: a server whose
   * registration lapsed (killed, cut off) stays listed, as down, until this process restarts.
   */
  knownServers(): ServerInfo[];
  /** Told whenever the leader (or this server's part) changes. */
  onChange(listener: () => void): void;
  /** Why the coordinator cannot be used now, if it cannot. */
  problem(): string | undefined;
  /**
   * Hands leadership to `to`, or to a member of the leader's synchronous set (election.ts,
   * planHandOver), and resolves once that server leads, within `timeoutMs`.
   */
  handOver(to: string | undefined, timeoutMs: number): Promise<HandedOver>;
  /** Steps down (if leading) and stops. */
  stop(): Promise<void>;
}

/** A handover done: who led, who leads now and in which term. */
export interface HandedOver {
  from: string;
  to: string;
  term: number;
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
  async handOver(): Promise<HandedOver> {
    throw new WatchwordError(
      'INVALID_REQUEST',
      'this datacenter has no coordinator (its leader is the first of --server-peers for good): there is no leadership to hand over',
    );
  }
  syncSet(): string[] {
    return [...this.sync];
  }
  servers(): ServerInfo[] {
    return this.peers.length > 0 ? this.peers : [this.self];
  }
  knownServers(): ServerInfo[] {
    return this.servers();
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
  /** The election's calls of etcd (default: through the etcd3 client, made at start). */
  client?: ElectionClient;
  logger: Logger;
}

/**
 * The election's shell: the etcd client, the timers, and the calls the decisions in
 * `election.ts` ask for (`etcd-client.ts` makes them).
 *
 * Fencing: the lease is valid until `TTL` after the last keep-alive that etcd confirmed
 * was *sent*; etcd cannot expire it earlier. This server stops acknowledging a margin
 * before that, so it stops before anyone else can win; and the lease is then retired
 * (resigned and revoked as soon as etcd answers), never kept alive again.
 */
export class EtcdCoordinator implements Coordinator {
  private client: ElectionClient | undefined;
  private readonly election: Election;
  private readonly listeners = new Set<() => void>();
  private timer: NodeJS.Timeout | undefined;
  private keepalive: NodeJS.Timeout | undefined;
  private stopped = false;
  private polling = false;
  /** What the listeners were last told: leader, term and whether this server leads. */
  private told = '';
  /** Every server seen registered since start, by name (its last address). */
  private readonly seen = new Map<string, ServerInfo>();

  constructor(private readonly options: EtcdOptions) {
    const leaseMs = options.leaseTTL * 1000;
    this.election = new Election({ self: options.self, leaseMs, marginMs: Math.min(1000, leaseMs / 5) });
    this.client = options.client;
  }

  private get etcd(): ElectionClient {
    if (!this.client) throw new WatchwordError('NO_LEADER', 'the coordinator has not started');
    return this.client;
  }

  async start(): Promise<void> {
    const { endpoints, datacenter, credentials, auth } = this.options;
    this.client ??= await Etcd3ElectionClient.connect({
      endpoints,
      datacenter,
      ...(credentials ? { credentials } : {}),
      ...(auth ? { auth } : {}),
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

  knownServers(): ServerInfo[] {
    for (const s of this.election.servers()) this.seen.set(s.name, s);
    return [...this.seen.values()].sort((a, b) => a.name.localeCompare(b.name));
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
    if (!this.isLeader() || lease === undefined || !leader)
      throw new WatchwordError('NO_LEADER', 'not the leader: cannot publish the synchronous set');
    const record: SyncRecord = { leader: this.options.self.name, term: leader.term, members };
    const res = await this.etcd.publish(record, lease);
    if (!res.ok) throw new WatchwordError('NO_LEADER', 'leadership was lost while publishing the synchronous set');
    this.election.syncPublished(record, res.revision);
  }

  async handOver(to: string | undefined, timeoutMs: number): Promise<HandedOver> {
    const plan = planHandOver(await this.etcd.read(), to);
    if (!plan.ok) {
      const code = plan.why === 'no-leader' ? 'NO_LEADER' : plan.why === 'unknown-server' ? 'INVALID_REQUEST' : 'CONFLICT';
      throw new WatchwordError(code, `Cannot hand leadership over: ${plan.message}`);
    }
    if (!(await this.etcd.handOver(plan.leaderRevision, plan.syncRevision, plan.record)))
      throw new WatchwordError('CONFLICT', 'Cannot hand leadership over: the leader or its synchronous set changed meanwhile; try again');
    this.options.logger.info({ from: plan.from, to: plan.to }, `coordinator: leadership handed from ${plan.from} to ${plan.to}`);
    void this.poll();
    for (const until = Date.now() + timeoutMs; Date.now() < until; ) {
      const l = this.leader();
      if (l?.name === plan.to && l.term > plan.term) return { from: plan.from, to: plan.to, term: l.term };
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new WatchwordError(
      'NO_LEADER',
      `leadership was handed from ${plan.from} to ${plan.to}, which has not taken the lead within ${timeoutMs} ms; ` +
        `only ${plan.to} may lead until it does (watchword operator servers)`,
    );
  }

  /** Keeps the current lease alive; a keep-alive confirmed by etcd extends validity from when it was sent. */
  private async renew(): Promise<void> {
    if (this.stopped) return;
    const id = this.election.currentLease();
    if (id !== undefined) {
      const sent = Date.now();
      try {
        this.election.keptAlive(id, sent, await this.etcd.keepalive(id));
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
    const etcd = this.etcd;
    const self = this.options.self;
    switch (step.kind) {
      case 'resign': {
        await etcd.resign(step.lease);
        await etcd.revoke(step.lease);
        this.election.resigned(step.lease);
        return;
      }
      case 'grant': {
        const sent = Date.now();
        this.election.granted(await etcd.grant(this.options.leaseTTL), sent);
        return;
      }
      case 'read':
        this.election.observed(await etcd.read(), Date.now());
        return;
      case 'clear':
        await etcd.clear(step.revision);
        this.election.cleared();
        return;
      case 'register':
        await etcd.register(self, step.lease);
        this.election.registered(step.lease);
        return;
      case 'campaign': {
        // The key and a record naming this server alone, in one transaction (election.ts, invariant 6):
        // until followers catch up, this server alone holds every write it acknowledges.
        const res = await etcd.campaign(self, step.lease, step.syncRevision, { leader: self.name, term: 0, members: [] });
        this.election.campaigned(step.lease, res.won, res.revision);
        return;
      }
      case 'claim': {
        const record: SyncRecord = { leader: self.name, term: step.term, members: [] };
        const res = await etcd.publish(record, step.lease);
        if (res.ok) this.election.syncPublished(record, res.revision);
        else this.election.beginRound(Date.now()); // the key moved meanwhile: read again
        return;
      }
    }
  }

  /** Logs what the election did, and tells the listeners when the leader, the term or this server's part changed. */
  private settle(): void {
    for (const note of this.election.takeNotes()) this.options.logger.info(`coordinator: ${note}`);
    for (const s of this.election.servers()) this.seen.set(s.name, s);
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
    const client = this.client;
    if (client) await Promise.all(this.election.leases().map((id) => client.revoke(id).catch(() => undefined)));
    client?.close();
  }
}
