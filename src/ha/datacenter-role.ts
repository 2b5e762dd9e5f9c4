import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { OperatorPrimaryResponse, OperatorServersResponse, ReplicationStatusResponse } from '../api/schemas.js';
import { epochSeenBy, primaryEpochOf } from '../replication/apply.js';
import { isPrimary } from '../config/schema.js';
import { WatchwordError } from '../domain/errors.js';
import type { FollowerHooks, SecondaryHooks } from './hooks.js';
import type { DatacenterInfo } from '../replication/protocol.js';
import { REPLICATION_PATH } from '../replication/protocol.js';
import { PeerClient } from '../transport/peer-client.js';
import { refuse } from '../transport/refuse.js';
import { type Coordinator, EtcdCoordinator, StaticCoordinator } from './coordinator.js';
import type { ClusterRole, RoleDeps, RoleParts } from './cluster-role.js';
import { SecretLookup, waitForIndex } from './secret-lookup.js';
import { SERVERS_PATH } from './server-protocol.js';
import { ServerGroup } from './servers.js';

const ZERO_TIME = '0001-01-01T00:00:00Z';

/** What primary and secondary share: the servers of the datacenter, and the leader's part. */
export abstract class DatacenterRole implements ClusterRole {
  abstract readonly kind: 'primary' | 'secondary';
  abstract readonly secondary: SecondaryHooks | undefined;
  group: ServerGroup | undefined;
  beforeConsistentRead?: () => Promise<void>;
  lookupUnknownSecret?: (secret: string, client: string | undefined) => Promise<boolean>;
  private readonly leaderClients = new Map<string, PeerClient>();
  protected readonly lookups: SecretLookup;

  /** The services' parts, from start() on. */
  private parts: RoleParts | undefined;

  protected get ports(): RoleParts {
    if (this.parts === undefined) throw new Error('the cluster role is used before it started');
    return this.parts;
  }

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
      primarySilentForMs: () => this.replicatingSilence(),
      onPrimarySilence: (ms) => this.heardOfPrimary(ms),
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
    if (!c)
      this.leaderClients.set(
        url,
        (c = new PeerClient(
          url,
          `${this.deps.config.datacenter} (leader)`,
          this.deps.transport.fetcher({ datacenter: this.deps.config.datacenter }),
        )),
      );
    return c;
  }

  protected waitForLocalIndex = (index: number, timeoutMs: number): Promise<boolean> =>
    waitForIndex(this.deps.store, index, timeoutMs, () => this.group?.holdsLeaderLog() ?? true);

  async start(parts: RoleParts): Promise<void> {
    this.parts = parts;
    // One path to leadership: a single server is a group of one that leads from the start.
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
    if (this.several) this.deps.onEvent?.('leadership', { Role: 'leader', Term: this.group?.leader()?.term ?? 0 });
    await this.startReplication();
    await this.ports.leaderParts.start();
  }

  /** This server no longer leads. */
  private async follow(): Promise<void> {
    this.deps.onEvent?.('leadership', { Role: 'follower' });
    await this.parts?.leaderParts.stop();
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
    if (!group)
      throw new WatchwordError('NO_LEADER', `no leader is known in datacenter ${this.deps.config.datacenter} yet; try again shortly`);
    const leader = this.leaderClient();
    if (leader) return { leader, waitForIndex: this.waitForLocalIndex };
    if (group.isLeader()) return undefined;
    // No leader known: writes are refused, not made here.
    const problem = group.coordinator.problem();
    throw new WatchwordError(
      'NO_LEADER',
      `no leader is known in datacenter ${this.deps.config.datacenter}${problem ? ` (this server ${problem})` : ' yet'}; try again shortly`,
    );
  }

  /**
   * `?consistent` at a follower goes through its proven leader (true when it did). With no
   * leader it can reach (between a leader's death and the next election, or while its
   * stream to the leader reconnects), the read is refused, never answered from this
   * server's own copy, which may lack writes the leader acknowledged. False: this server
   * leads (or is alone), and answers itself.
   */
  protected async throughLeader(): Promise<boolean> {
    if (!this.several || this.isLeader()) return false;
    const leader = this.leaderClient();
    if (!leader)
      throw new WatchwordError(
        'NO_LEADER',
        `this server is a follower and reaches no leader of datacenter ${this.deps.config.datacenter} now; a ?consistent read needs ` +
          `one: try again shortly or read without ?consistent`,
      );
    await this.leaderBarrier(leader);
    return true;
  }

  /** `?consistent` at a follower: reach the leader's current index first. */
  protected async leaderBarrier(leader: PeerClient): Promise<void> {
    const index = await leader.currentIndex(2000);
    if (!(await this.waitForLocalIndex(index, 2500))) {
      throw new WatchwordError(
        'NO_LEADER',
        `this server has not caught up with its leader (index ${index}); try again or read without ?consistent`,
      );
    }
  }

  abstract checkChosenIDs(ids: { accessor?: string; secret?: string }, local: boolean): Promise<void>;
  abstract replicationStatus(): ReplicationStatusResponse;
  abstract primarySilentForMs(): number | undefined;
  abstract usesWritten(uses: ReadonlyArray<readonly [string, number]>): void;
  /** How long the primary has been silent as this server knows it, told to its followers while it leads (a secondary). */
  protected replicatingSilence(): number | undefined {
    return undefined;
  }

  /** The leader this server follows says the primary was heard `ms` ago (a secondary). */
  protected heardOfPrimary(_ms: number): void {}
  abstract reportedDatacenters(): DatacenterInfo[];
  abstract knownLeader(): boolean;
  abstract lastContactMs(): number;
  protected abstract upgradeReplication(req: IncomingMessage, socket: Duplex, head: Buffer): void;

  leaderAddress(): string {
    // A server that cannot reach the coordinator knows no leader, not its own stale record.
    return !this.group || this.group.isLeader() ? this.deps.advertised() : (this.group.provenLeader()?.address ?? '');
  }

  peers(): string[] {
    return this.group ? this.group.coordinator.servers().map((s) => s.address) : [this.deps.advertised()];
  }

  /**
   * GET /v1/operator/primary: at the primary, itself (its epoch, its index); at a secondary, the
   * primary it follows as its replication reports it (the epoch its cursor keeps, the index
   * applied here, when it was last heard: absent before the first frame).
   */
  primaryStatus(): OperatorPrimaryResponse {
    const { config, store } = this.deps;
    if (isPrimary(config)) return { Datacenter: config.datacenter, Epoch: primaryEpochOf(store), Index: store.currentIndex() };
    const status = this.replicationStatus();
    const heard = status.Connected || status.LastSuccess !== ZERO_TIME;
    return {
      Datacenter: config.primary_datacenter,
      Epoch: epochSeenBy(store),
      Index: status.ReplicatedIndex,
      ...(heard ? { LastContact: new Date(Date.now() - status.LastContactMs).toISOString() } : {}),
    };
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
      Servers: [
        {
          Name: config.node_name,
          Address: advertised(),
          Role: 'leader',
          Term: 1,
          AppliedSeq: store.serverPosition().seq,
          AppliedIndex: store.currentIndex(),
          LagBatches: 0,
          InSyncSet: false,
          Connected: true,
          Registered: true,
        },
      ],
      AnsweredBy: config.node_name,
    };
  }

  /** The header naming the leader on a follower's refusals: only a leader this server has proven. */
  protected leaderHeader(): Record<string, string> {
    const leader = this.group?.provenLeader();
    return leader && !this.group?.isLeader() ? { 'X-Service-Leader': leader.address } : {};
  }

  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => undefined);
    const { config } = this.deps;
    const path = new URL(req.url ?? '/', 'http://server').pathname;
    if (path === SERVERS_PATH) {
      if (this.group)
        return this.group.handleUpgrade(req, socket, head, (status, message) => refuse(socket, status, message, this.leaderHeader()));
      return refuse(socket, 404, `datacenter ${config.datacenter} runs a single server`);
    }
    if (path !== REPLICATION_PATH) return refuse(socket, 404, `no WebSocket endpoint at ${path}`);
    this.upgradeReplication(req, socket, head);
  }
}

/** GET /v1/acl/replication where this server does not replicate (the primary, or a follower). */
export function notReplicating(
  { config, store }: RoleDeps,
  secondaries: NonNullable<ReplicationStatusResponse['Secondaries']>,
): ReplicationStatusResponse {
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
