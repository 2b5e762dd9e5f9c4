import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { OperatorServersResponse, ReplicationStatusResponse } from '../api/schemas.js';
import type { Config } from '../config/schema.js';
import { WatchwordError, conflict, isWatchwordError } from '../domain/errors.js';
import { isUUID } from '../domain/ids.js';
import type { FollowerHooks, SecondaryHooks } from '../http/forward.js';
import { RateLimiter } from '../http/rate-limit.js';
import type { Metrics } from '../observability/metrics.js';
import type { DatacenterInfo } from '../replication/protocol.js';
import { REPLICATION_PATH } from '../replication/protocol.js';
import { PeerClient } from '../replication/primary-client.js';
import { DEFAULT_PRIMARY_OPTIONS, ReplicationPrimary, refuse } from '../replication/primary.js';
import { ReplicationSecondary } from '../replication/secondary.js';
import type { AclResolver } from '../service/acl-resolver.js';
import type { LevelStore } from '../store/level-store.js';
import { type Coordinator, EtcdCoordinator, StaticCoordinator } from './coordinator.js';
import { SERVERS_PATH } from './server-protocol.js';
import type { Transport } from '../transport/transport.js';
import { ServerGroup } from './servers.js';

/** Replication timings and sizes; tests shorten them. */
export const DEFAULT_REPLICATION_OPTIONS = {
  ...DEFAULT_PRIMARY_OPTIONS,
  backoffMinMs: 1000,
  backoffMaxMs: 30_000,
};

export type ReplicationOptions = typeof DEFAULT_REPLICATION_OPTIONS;

/**
 * A server's place in the cluster (SPEC §6, §13): primary or secondary datacenter, and
 * leader or follower within its own. Services and the HTTP layer ask it, never the
 * configuration: where a write goes, what a consistent read waits for, who is asked
 * about a secret this server does not hold, and how replication stands.
 */
export interface ClusterRole {
  readonly kind: 'primary' | 'secondary';
  /** Several servers in this datacenter: the group (undefined for a single server). */
  readonly group: ServerGroup | undefined;
  /** Starts what this role runs; called once HTTP listens. */
  start(): Promise<void>;
  /** Gives up leadership first (so a successor need not wait), then stops replication. */
  stop(): Promise<void>;
  /** Whether this server leads its datacenter. */
  isLeader(): boolean;
  /** A write made at this server: undefined to apply here, or the leader to send it to. Throws NO_LEADER while none is known. */
  writeTarget(): FollowerHooks | undefined;
  /** On a secondary: global writes go to the primary (undefined on the primary). */
  readonly secondary: SecondaryHooks | undefined;
  /** `?consistent`: resolves once this server has what its leader (or primary) had when asked. */
  beforeConsistentRead?: () => Promise<void>;
  /** A secret this server does not hold: true once its token has arrived here. */
  lookupUnknownSecret?: (secret: string, client: string | undefined) => Promise<boolean>;
  /** IDs chosen by a client for a new token must not be in use anywhere they would clash. */
  checkChosenIDs(ids: { accessor?: string; secret?: string }, local: boolean): Promise<void>;
  replicationStatus(): ReplicationStatusResponse;
  /** Datacenters other daemons reported over replication. */
  reportedDatacenters(): DatacenterInfo[];
  /** Whether a connection from this address is another server or datacenter's daemon. */
  isPeerAddress(ip: string): boolean;
  knownLeader(): boolean;
  lastContactMs(): number;
  /** The leader's address ('' while none is known). */
  leaderAddress(): string;
  peers(): string[];
  servers(): OperatorServersResponse;
  /** WebSocket upgrades: the replication stream and the servers' stream. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
}

export interface RoleDeps {
  config: Config;
  store: LevelStore;
  resolver: AclResolver;
  metrics: Metrics;
  logger: Logger;
  replication: ReplicationOptions;
  /** How this server reaches and accepts its peers (TLS, identity checks). */
  transport: Transport;
  /** HA timings; tests shorten them. */
  serverTimings?: { pollMs?: number; syncTimeoutMs?: number };
  /** Where other servers and datacenters reach this one. */
  advertised(): string;
  /** This datacenter's view of an object the primary just wrote (secondaries' forwarded writes). */
  localView(kind: 'token' | 'policy' | 'role', id: string): unknown | undefined;
  /** What the leader runs besides replication (built-ins, the reaper); started and stopped with leadership. */
  leaderParts: { start(): Promise<void>; stop(): Promise<void> };
}

export function createClusterRole(deps: RoleDeps): ClusterRole {
  return deps.config.placement.role === 'primary' ? new PrimaryRole(deps) : new SecondaryRole(deps, deps.config.placement.primaryAddresses);
}

const ZERO_TIME = '0001-01-01T00:00:00Z';

/** What primary and secondary share: the servers of the datacenter, and the leader's part. */
abstract class DatacenterRole implements ClusterRole {
  abstract readonly kind: 'primary' | 'secondary';
  abstract readonly secondary: SecondaryHooks | undefined;
  group: ServerGroup | undefined;
  beforeConsistentRead?: () => Promise<void>;
  lookupUnknownSecret?: (secret: string, client: string | undefined) => Promise<boolean>;
  private readonly leaderClients = new Map<string, PeerClient>();
  protected readonly lookups: SecretLookup;

  /** Several servers in this datacenter (the group itself is made once HTTP listens). */
  protected readonly several: boolean;

  constructor(protected readonly deps: RoleDeps) {
    this.lookups = new SecretLookup(deps.config.secret_lookup_rate);
    this.several = deps.config.servers.kind !== 'single';
    // Several servers: nothing is written here until the coordinator says this server leads.
    if (this.several) deps.store.setFollower(true);
  }

  /** The group of servers, with its coordinator; this server's address is known by now. */
  private createGroup(): ServerGroup {
    const { config, logger, replication: repl, advertised, transport } = this.deps;
    const mode = config.servers;
    const self = { name: mode.kind === 'etcd' ? config.node_name : advertised(), address: advertised() };
    const coordinator: Coordinator =
      mode.kind === 'etcd'
        ? new EtcdCoordinator({
            endpoints: [...mode.endpoints],
            datacenter: config.datacenter,
            self,
            leaseTTL: mode.leaseMs / 1000,
            pollMs: this.deps.serverTimings?.pollMs ?? 250,
            ...transport.etcdClientOptions(),
            logger,
          })
        : new StaticCoordinator(self, mode.kind === 'static' ? mode.peers.map((a) => ({ name: a, address: a })) : []);
    return new ServerGroup(this.deps.store, coordinator, {
      name: self.name,
      datacenter: config.datacenter,
      address: advertised,
      transport,
      syncFollowers: mode.kind === 'single' ? 0 : mode.syncFollowers,
      syncTimeoutMs: this.deps.serverTimings?.syncTimeoutMs ?? 2000,
      leaseMs: mode.kind === 'etcd' ? mode.leaseMs : 5000,
      heartbeatMs: repl.heartbeatMs,
      deadPeerMs: repl.deadPeerMs,
      backoffMinMs: Math.min(repl.backoffMinMs, 250),
      backoffMaxMs: Math.min(repl.backoffMaxMs, 2000),
      tailBatches: 20_000,
      logger,
      onLead: () => this.lead(),
      onFollow: () => this.follow(),
    });
  }

  /** The leader's client, while another server of this datacenter leads. */
  protected leaderClient(): PeerClient | undefined {
    const url = this.group?.isLeader() === false ? this.group.leaderURL() : undefined;
    if (!url) return undefined;
    let c = this.leaderClients.get(url);
    if (!c) this.leaderClients.set(url, (c = new PeerClient(url, `${this.deps.config.datacenter} (leader)`, this.deps.transport.fetcher({ datacenter: this.deps.config.datacenter }))));
    return c;
  }

  protected waitForLocalIndex = (index: number, timeoutMs: number): Promise<boolean> => waitForIndex(this.deps.store, index, timeoutMs);

  async start(): Promise<void> {
    if (!this.several) return this.lead();
    this.group = this.createGroup();
    await this.group.start();
  }

  async stop(): Promise<void> {
    await this.group?.stop();
    await this.stopReplication();
  }

  /** This server now leads its datacenter. */
  private async lead(): Promise<void> {
    await this.startReplication();
    await this.deps.leaderParts.start();
  }

  /** This server no longer leads. */
  private async follow(): Promise<void> {
    await this.deps.leaderParts.stop();
    await this.stopReplication();
  }

  protected abstract startReplication(): Promise<void>;
  protected abstract stopReplication(): Promise<void>;

  isLeader(): boolean {
    return this.several ? (this.group?.isLeader() ?? false) : true;
  }

  writeTarget(): FollowerHooks | undefined {
    if (!this.several) return undefined;
    const group = this.group;
    if (!group) throw new WatchwordError('NO_LEADER', `no leader is known in datacenter ${this.deps.config.datacenter} yet; try again shortly`);
    const leader = this.leaderClient();
    if (leader) return { leader, waitForIndex: this.waitForLocalIndex };
    if (group.isLeader()) return undefined;
    // No leader known: writes are refused, not made here.
    const problem = group.coordinator.problem();
    throw new WatchwordError('NO_LEADER', `no leader is known in datacenter ${this.deps.config.datacenter}${problem ? ` (this server ${problem})` : ' yet'}; try again shortly`);
  }

  /** `?consistent` at a follower: reach the leader's current index first. */
  protected async leaderBarrier(leader: PeerClient): Promise<void> {
    const index = await leader.currentIndex(2000);
    if (!(await this.waitForLocalIndex(index, 2500))) {
      throw new WatchwordError('NO_LEADER', `this server has not caught up with its leader (index ${index}); try again or read without ?consistent`);
    }
  }

  abstract checkChosenIDs(ids: { accessor?: string; secret?: string }, local: boolean): Promise<void>;
  abstract replicationStatus(): ReplicationStatusResponse;
  abstract reportedDatacenters(): DatacenterInfo[];
  abstract knownLeader(): boolean;
  abstract lastContactMs(): number;
  protected abstract datacenterPeer(ip: string): boolean;
  protected abstract upgradeReplication(req: IncomingMessage, socket: Duplex, head: Buffer): void;

  isPeerAddress(ip: string): boolean {
    return (this.group?.coordinator.servers().some((s) => hostOf(`http://${s.address}`) === ip) ?? false) || this.datacenterPeer(ip);
  }

  leaderAddress(): string {
    // A server that cannot reach the coordinator knows no leader, not its own stale record.
    return !this.group || this.group.isLeader() ? this.deps.advertised() : (this.group.otherLeader()?.address ?? '');
  }

  peers(): string[] {
    return this.group ? this.group.coordinator.servers().map((s) => s.address) : [this.deps.advertised()];
  }

  servers(): OperatorServersResponse {
    const { config, store, advertised } = this.deps;
    if (this.group) return { Datacenter: config.datacenter, ...this.group.status() };
    return {
      Datacenter: config.datacenter,
      Leader: advertised(),
      Term: 1,
      SyncSet: [],
      RunningWithoutSyncCopy: false,
      Problem: null,
      Servers: [{ Name: config.node_name, Address: advertised(), Role: 'leader', Term: 1, AppliedSeq: store.serverPosition().seq, AppliedIndex: store.currentIndex(), LagBatches: 0, InSyncSet: false, Connected: true }],
    };
  }

  /** The header naming the leader on a follower's refusals. */
  protected leaderHeader(): Record<string, string> {
    const leader = this.group?.otherLeader();
    return leader && !this.group?.isLeader() ? { 'X-Service-Leader': leader.address } : {};
  }

  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => undefined);
    const { config } = this.deps;
    const path = new URL(req.url ?? '/', 'http://server').pathname;
    if (path === SERVERS_PATH) {
      if (this.group) return this.group.handleUpgrade(req, socket, head, (status, message) => refuse(socket, status, message, this.leaderHeader()));
      return refuse(socket, 404, `datacenter ${config.datacenter} runs a single server`);
    }
    if (path !== REPLICATION_PATH) return refuse(socket, 404, `no WebSocket endpoint at ${path}`);
    this.upgradeReplication(req, socket, head);
  }
}

class PrimaryRole extends DatacenterRole {
  readonly kind = 'primary';
  readonly secondary = undefined;
  private replication: ReplicationPrimary | undefined;

  constructor(deps: RoleDeps) {
    super(deps);
    // A single server leads from the start: secondaries that connect at once find the stream.
    if (!this.several) void this.startReplication();
    if (this.several) {
      this.beforeConsistentRead = async () => {
        const leader = this.leaderClient();
        if (leader) await this.leaderBarrier(leader);
      };
      this.lookupUnknownSecret = (secret, client) => {
        // A follower asks its leader: the token may have been created there a moment ago.
        const leader = this.leaderClient();
        return leader ? this.lookups.lookUp(secret, client, leader, this.waitForLocalIndex) : Promise.resolve(false);
      };
    }
  }

  protected async startReplication(): Promise<void> {
    const { store, resolver, logger, replication, config, advertised } = this.deps;
    // Made at once, with nothing to wait for: a single server's stream is there before HTTP listens.
    this.replication ??= new ReplicationPrimary(store, resolver, logger, { ...replication, retention: config.log_retention }, { datacenter: config.datacenter, address: advertised, transport: this.deps.transport });
  }

  protected async stopReplication(): Promise<void> {
    const r = this.replication;
    this.replication = undefined;
    await r?.close();
  }

  /** A global token's chosen IDs must not be a Local token's at any connected secondary. */
  async checkChosenIDs(ids: { accessor?: string; secret?: string }, local: boolean): Promise<void> {
    if (local || !this.replication) return;
    const wanted = [ids.accessor, ids.secret].filter((id): id is string => id !== undefined);
    const held = await this.replication.idsHeldBySecondaries(wanted);
    const by = (id: string | undefined) => held.find((h) => h.id === id);
    const accessor = by(ids.accessor);
    if (accessor) throw conflict(`Invalid Token: AccessorID is already in use (by a Local token in datacenter ${accessor.datacenter})`);
    const secret = by(ids.secret);
    if (secret) throw conflict(`Invalid Token: SecretID is already in use (by a Local token in datacenter ${secret.datacenter})`);
  }

  replicationStatus(): ReplicationStatusResponse {
    return notReplicating(this.deps, this.replication?.secondaries() ?? []);
  }

  reportedDatacenters(): DatacenterInfo[] {
    return this.replication?.datacenters() ?? [];
  }

  protected datacenterPeer(ip: string): boolean {
    return this.replication?.isPeerAddress(ip) ?? false;
  }

  knownLeader(): boolean {
    return true;
  }

  lastContactMs(): number {
    return 0;
  }

  protected upgradeReplication(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    if (this.replication) return void this.replication.upgrade(req, socket, head);
    const leader = this.group?.otherLeader();
    const { datacenter } = this.deps.config;
    refuse(socket, 421, leader ? `this server is a follower; the leader of ${datacenter} is ${leader.name} at ${leader.address}` : `no leader is known in ${datacenter} yet`, this.leaderHeader());
  }
}

class SecondaryRole extends DatacenterRole {
  readonly kind = 'secondary';
  readonly secondary: SecondaryHooks;
  private replication: ReplicationSecondary | undefined;
  private readonly primary: PeerClient;

  constructor(
    deps: RoleDeps,
    private readonly primaryAddresses: readonly string[],
  ) {
    super(deps);
    const { store, config } = deps;
    this.primary = new PeerClient(primaryAddresses.join(','), config.primary_datacenter, deps.transport.fetcher({ datacenter: config.primary_datacenter }));
    const waitForApplied = (index: number, timeoutMs: number) => this.replication?.waitForApplied(index, timeoutMs) ?? Promise.resolve(false);
    this.secondary = {
      primary: this.primary,
      isLocalToken: async (id: string) => isUUID(id) && store.reader.getToken(id)?.Local === true,
      waitForApplied,
      localView: async (kind, id) => deps.localView(kind, id),
      currentIndex: () => store.currentIndex(),
    };
    this.beforeConsistentRead = async () => {
      const leader = this.leaderClient();
      if (leader) return this.leaderBarrier(leader);
      // ?consistent on a secondary: reach the primary's current index first, within 5 s.
      const index = await this.primary.currentIndex(2000);
      if (!(await waitForApplied(index, 2500))) {
        throw new WatchwordError('PRIMARY_UNAVAILABLE', `replication has not caught up with the primary (index ${index}); try again or read without ?consistent`);
      }
    };
    this.lookupUnknownSecret = (secret, client) => {
      const leader = this.leaderClient();
      if (leader) return this.lookups.lookUp(secret, client, leader, this.waitForLocalIndex);
      return this.lookups.lookUp(secret, client, this.primary, waitForApplied);
    };
  }

  protected async startReplication(): Promise<void> {
    const { store, logger, metrics, config, replication: repl, advertised } = this.deps;
    this.replication = new ReplicationSecondary(store, logger, metrics, {
      transport: this.deps.transport,
      datacenter: config.datacenter,
      primaryDatacenter: config.primary_datacenter,
      primaryAddress: this.primaryAddresses.join(','),
      ...(config.replication_token ? { token: config.replication_token } : {}),
      address: advertised,
      heartbeatMs: repl.heartbeatMs,
      deadPeerMs: repl.deadPeerMs,
      backoffMinMs: repl.backoffMinMs,
      backoffMaxMs: repl.backoffMaxMs,
    });
    await this.replication.start();
  }

  protected async stopReplication(): Promise<void> {
    const r = this.replication;
    this.replication = undefined;
    await r?.stop();
  }

  /**
   * IDs chosen for a Local token at a secondary must not be any global token's accessor
   * or secret (both are checked both ways, as on create). An unreachable primary leaves
   * only the local checks: Local writes keep working while it is down.
   */
  async checkChosenIDs(ids: { accessor?: string; secret?: string }, local: boolean): Promise<void> {
    const token = this.deps.config.replication_token;
    if (!local || !token) return;
    const inUse = async (id: string): Promise<boolean> => (await this.primary.lookupSecret(id, 2000)).found || (isUUID(id) && (await this.primary.accessorExists(id, token, 2000)));
    try {
      if (ids.accessor && (await inUse(ids.accessor))) throw conflict('Invalid Token: AccessorID is already in use');
      if (ids.secret && (await inUse(ids.secret))) throw conflict('Invalid Token: SecretID is already in use');
    } catch (err) {
      if (isWatchwordError(err) && err.code === 'CONFLICT') throw err;
      this.deps.logger.warn({ err: (err as Error).message }, 'cannot check chosen token IDs at the primary; checked here only');
    }
  }

  replicationStatus(): ReplicationStatusResponse {
    // A follower of a secondary datacenter: its leader replicates.
    return this.replication?.status() ?? notReplicating(this.deps, []);
  }

  reportedDatacenters(): DatacenterInfo[] {
    return this.replication?.datacenters() ?? [];
  }

  protected datacenterPeer(_ip: string): boolean {
    return false;
  }

  knownLeader(): boolean {
    return this.replication?.isConnected() ?? false;
  }

  lastContactMs(): number {
    return this.replication?.lastContactMs() ?? 0;
  }

  protected upgradeReplication(_req: IncomingMessage, socket: Duplex): void {
    const { config } = this.deps;
    // Only the primary serves the replication stream; say so rather than drop the socket.
    refuse(socket, 400, `datacenter ${config.datacenter} is a secondary; replication connects to the primary (${config.primary_datacenter}) at ${this.primaryAddresses.join(',')}`);
  }
}

/** GET /v1/acl/replication where this server does not replicate (the primary, or a follower). */
function notReplicating({ config, store }: RoleDeps, secondaries: NonNullable<ReplicationStatusResponse['Secondaries']>): ReplicationStatusResponse {
  const index = store.currentIndex();
  return {
    Enabled: false,
    Running: false,
    SourceDatacenter: config.datacenter,
    ReplicationType: 'tokens',
    ReplicatedIndex: index,
    ReplicatedRoleIndex: index,
    ReplicatedTokenIndex: index,
    LastSuccess: ZERO_TIME,
    LastError: ZERO_TIME,
    LastErrorMessage: '',
    Connected: false,
    PrimaryIndex: index,
    LagEntries: 0,
    LastContactMs: 0,
    Secondaries: secondaries,
  };
}

/**
 * Secrets this server does not hold, looked up where they may have been created (the
 * leader, or the primary). When found, waits (briefly) for the token to arrive here.
 * Negative answers are kept for a second; look-ups are limited per client
 * (RATE_LIMITED past it), so made-up secrets do not each become a trip.
 */
export class SecretLookup {
  private readonly unknown = new Map<string, number>();
  private readonly limiter: RateLimiter;

  constructor(rate: number) {
    this.limiter = new RateLimiter(rate, Math.max(1, Math.ceil(rate * 2)));
  }

  async lookUp(secret: string, client: string | undefined, peer: PeerClient, waitForApplied: (index: number, timeoutMs: number) => Promise<boolean>): Promise<boolean> {
    const now = Date.now();
    if ((this.unknown.get(secret) ?? 0) > now) return false;
    const wait = this.limiter.take(client ?? '');
    if (wait > 0) {
      throw new WatchwordError('RATE_LIMITED', `Too many unknown secrets from ${client ?? 'this client'}: secrets this datacenter does not hold are looked up at the primary at most ${this.limiter.rate} times per second per client`, { retryAfter: wait });
    }
    try {
      const { found, index } = await peer.lookupSecret(secret, 2000);
      if (!found) {
        if (this.unknown.size >= 10_000) this.unknown.clear();
        this.unknown.set(secret, now + 1000);
        return false;
      }
      return await waitForApplied(index, 3000);
    } catch {
      // Unreachable: answer from what this server holds.
      return false;
    }
  }
}

/** Resolves true once the store's durable index reaches `index`, false after `timeoutMs`. */
export function waitForIndex(store: LevelStore, index: number, timeoutMs: number): Promise<boolean> {
  if (store.currentIndex() >= index) return Promise.resolve(true);
  return new Promise((resolve) => {
    const off = store.onCommit((e) => {
      if (e.index >= index) finish(true);
    });
    const timer = setTimeout(() => finish(store.currentIndex() >= index), timeoutMs);
    function finish(ok: boolean): void {
      off();
      clearTimeout(timer);
      resolve(ok);
    }
  });
}

/** The host of a URL, brackets of an IPv6 literal removed. */
export function hostOf(url: string): string | undefined {
  try {
    return new URL(url).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return undefined;
  }
}
