import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type {
  OperatorPrimaryResponse,
  OperatorServersResponse,
  PrimaryPlacementResponse,
  PromotionResponse,
  ReplicationStatusResponse,
  TransferLeaderResponse,
} from '../api/schemas.js';
import { WatchwordError } from '../domain/errors.js';
import type { Arrival, FollowerHooks, SecondaryHooks } from './hooks.js';
import type { DatacenterInfo } from '../replication/protocol.js';
import { REPLICATION_PATH } from '../replication/protocol.js';
import type { Placement, PlacementRecord, Standing } from '../replication/placement.js';
import { PrimaryContact } from '../replication/primary-contact.js';
import { META } from '../store/schema.js';
import { PeerClient } from '../transport/peer-client.js';
import { refuse } from '../transport/refuse.js';
import { FENCED_ON_STOP } from '../version.js';
import { type Coordinator, EtcdCoordinator, StaticCoordinator } from './coordinator.js';
import { handOverLeadership } from './leader-handover.js';
import type { ClusterRole, RoleDeps, RoleParts } from './cluster-role.js';
import { PrimaryFinder, outranks } from './primary-finder.js';
import { PrimaryMoves } from './primary-moves.js';
import { PrimarySide } from './primary-role.js';
import { SecondarySide } from './secondary-role.js';
import { SecretLookup, awaitIndex, waitForIndex } from './secret-lookup.js';
import { ReleaseBook, selfRelease } from '../replication/releases.js';
import { releaseColumns } from './servers.js';
import { SERVERS_PATH } from './server-protocol.js';
import { ServerGroup } from './servers.js';
import type { RoleHost, Side } from './side.js';

/**
 * A server's place (docs/datacenters.md, "Multiple datacenters"; docs/servers.md): the
 * servers of its datacenter and which leads them, and its datacenter's side, primary or
 * secondary. The side can change while the server runs (docs/datacenters.md): a promotion, a handover, or a
 * primary of a newer epoch learned from a peer; the datacenter's placement in the store says which,
 * and every server of the datacenter takes the side it names (a follower when the batch that wrote
 * it arrives).
 */
export class DatacenterRole implements ClusterRole, RoleHost {
  group: ServerGroup | undefined;
  private readonly leaderClients = new Map<string, PeerClient>();
  readonly lookups: SecretLookup;
  /** When the primary was last heard, directly or through the leader: outlives every change of side and leadership. */
  readonly contact = new PrimaryContact();
  /** The side now, and the standing it was made for. */
  private side: Side;
  private standing: Standing;
  /** Changes of side, one at a time. */
  private changing: Promise<unknown> = Promise.resolve();
  private leading = false;
  private stopped = false;
  private readonly finder: PrimaryFinder;
  /** The primary role's moves: promotion and transfer (primary-moves.ts). */
  private readonly moves: PrimaryMoves;
  private unwatch: (() => void) | undefined;

  /** The services' parts, from start() on. */
  private parts: RoleParts | undefined;

  ports(): RoleParts {
    if (this.parts === undefined) throw new Error('the cluster role is used before it started');
    return this.parts;
  }

  /** Several servers in this datacenter (the group itself is made once HTTP listens). */
  readonly several: boolean;
  /** The cluster's versions as this server knows them (docs/upgrading.md, "Upgrading"). */
  readonly releases: ReleaseBook;

  readonly deps: RoleDeps;

  constructor(
    deps: RoleDeps,
    readonly placement: Placement,
  ) {
    this.deps = {
      ...deps,
      onEvent: (type, details) => {
        deps.onEvent?.(type, details);
        // A secondary came (its address is kept for later asking), or a stale primary was refused: ask now.
        if (type === 'stale-primary' || type === 'replication-connect') this.finder.poke();
      },
    };
    this.lookups = new SecretLookup(deps.config.secret_lookup_rate);
    this.several = deps.config.servers.kind !== 'single';
    this.releases = new ReleaseBook(
      deps.config.datacenter,
      () =>
        this.servers().Servers.map((s) => ({
          Name: s.Name,
          Release: s.Release ?? null,
          Replication: s.Protocols?.Replication ?? null,
          Servers: s.Protocols?.Servers ?? null,
        })),
      () => this.isLeader(),
      deps.store,
      META.finalized,
    );
    this.contact.onHeardDirectly(() => this.group?.relayPrimaryContact());
    // Several servers: nothing is written here until the coordinator says this server leads.
    if (this.several) deps.store.setFollower(true);
    this.standing = placement.now();
    this.side = this.sideFor(this.standing);
    deps.store.setChangeLog(this.standing.isPrimary);
    this.finder = new PrimaryFinder({
      datacenter: deps.config.datacenter,
      ...(deps.config.replication_token ? { token: deps.config.replication_token } : {}),
      store: deps.store,
      placement,
      transport: deps.transport,
      logger: deps.logger,
      configured: {
        ...(deps.config.placement.role === 'secondary' && deps.config.placement.primaryAddresses[0]
          ? { [deps.config.primary_datacenter]: deps.config.placement.primaryAddresses[0] }
          : {}),
        ...deps.config.datacenter_addresses,
      },
      reported: () => this.side.reportedDatacenters(),
      primaryHeard: () => this.side.knownLeader() && this.contact.silentForMs() < deps.replication.deadPeerMs,
      everyMs: deps.replication.primaryProbeMs,
      follow: (record) => this.followNewer(record),
    });
    this.moves = new PrimaryMoves({
      deps: this.deps,
      placement,
      contact: this.contact,
      several: this.several,
      side: () => this.side,
      isLeader: () => this.isLeader(),
      leaderAddress: () => this.leaderAddress(),
      changeSide: (write) => this.changeSide(write),
    });
  }

  get kind(): 'primary' | 'secondary' {
    return this.side.kind;
  }

  get secondary(): SecondaryHooks | undefined {
    return this.side.secondary;
  }

  get beforeConsistentRead(): (() => Promise<void>) | undefined {
    return this.side.beforeConsistentRead;
  }

  get lookupUnknownSecret(): ((secret: string, client: string | undefined) => Promise<boolean>) | undefined {
    return this.side.lookupUnknownSecret;
  }

  private sideFor(standing: Standing): Side {
    return standing.isPrimary ? new PrimarySide(this) : new SecondarySide(this, standing);
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
      primarySilentForMs: () => this.side.replicatingSilence(),
      releases: this.releases,
      onPrimarySilence: (ms) => this.side.heardOfPrimary(ms),
      logger,
      onLead: () => this.lead(),
      onFollow: () => this.follow(),
    });
  }

  /** The leader's client, while another server of this datacenter leads. */
  leaderClient(): PeerClient | undefined {
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

  waitForLocalIndex = (index: number, timeoutMs: number): Promise<boolean> =>
    waitForIndex(this.deps.store, index, timeoutMs, () => this.group?.holdsLeaderLog() ?? true);

  /**
   * A write about to go to the leader: its answer's index is looked for here. From a leader that
   * takes no write once it stops leading, in whichever leader's log this server holds (a successor
   * holds every write it acknowledged); from one that did (FENCED_ON_STOP), only over its own
   * stream: once that stream ends first, whether the write was kept is unknown.
   */
  private sendingToLeader(): (index: number, timeoutMs: number) => Promise<Arrival> {
    const group = this.group;
    const mark = group?.leaderMark();
    const bound = group !== undefined && mark !== undefined && mark.version < FENCED_ON_STOP.servers ? mark : undefined;
    return async (index, timeoutMs) => {
      const how = await awaitIndex(
        this.deps.store,
        index,
        timeoutMs,
        () => (group?.holdsLeaderLog() ?? true) && !(bound && group?.markEnded(bound)),
        // This server stopping ends the wait too: the answer goes back now, not when the stop cuts the connection.
        () => this.stopped || (bound !== undefined && group?.markEnded(bound) === true),
      );
      if (how === 'reached') return 'applied';
      return how === 'ended' && bound !== undefined && group?.markEnded(bound) ? 'unknown' : 'pending';
    };
  }

  async start(parts: RoleParts): Promise<void> {
    this.parts = parts;
    // A follower takes the side its leader's batches name (a promotion, a newer primary followed).
    this.unwatch = this.deps.store.onCommit(() => {
      if (this.placement.now() !== this.standing) void this.takeSide().catch(() => undefined);
    });
    // One path to leadership: a single server is a group of one that leads from the start.
    if (!this.several) return this.lead();
    this.group = this.createGroup();
    await this.group.start();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unwatch?.();
    this.finder.stop();
    await this.group?.stop();
    await this.changing;
    await this.side.stopReplication();
  }

  /** This server now leads its datacenter. */
  private async lead(): Promise<void> {
    if (this.several) this.deps.onEvent?.('leadership', { Role: 'leader', Term: this.group?.leader()?.term ?? 0 });
    await this.serially(async () => {
      this.leading = true;
      this.takeStanding();
      await this.side.startReplication();
    });
    await this.ports().leaderParts.start();
    // The leader asks the other datacenters whether a newer primary exists (a returning old primary learns it was replaced).
    this.finder.start();
  }

  /** This server no longer leads. */
  private async follow(): Promise<void> {
    this.deps.onEvent?.('leadership', { Role: 'follower' });
    this.finder.stop();
    await this.parts?.leaderParts.stop();
    await this.serially(async () => {
      this.leading = false;
      await this.side.stopReplication();
    });
  }

  /** Runs a change of side or leadership after the ones before it. */
  private serially<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.changing.then(fn, fn);
    this.changing = run.catch(() => undefined);
    return run;
  }

  /** The side the placement names now, if it is not the one held (replication moves over while this server leads). */
  private takeSide(): Promise<void> {
    return this.serially(async () => {
      if (this.stopped || this.placement.now() === this.standing) return;
      if (this.leading) await this.side.stopReplication();
      this.takeStanding();
      if (this.leading && !this.stopped) await this.side.startReplication();
    });
  }

  private takeStanding(): void {
    const now = this.placement.now();
    if (now === this.standing) return;
    const was = this.standing;
    this.standing = now;
    this.side = this.sideFor(now);
    this.deps.store.setChangeLog(now.isPrimary);
    this.deps.logger.warn(
      { primary: now.primary, epoch: this.placement.epoch(), was: was.primary },
      now.isPrimary ? 'this datacenter is now the primary' : `this datacenter now follows the primary ${now.primary}`,
    );
  }

  /**
   * A primary of a newer epoch, learned from a peer (docs/datacenters.md): written down first (a restart
   * follows it too), then followed. A returning old primary stops taking global writes here.
   */
  private followNewer(record: PlacementRecord): Promise<void> {
    return this.serially(async () => {
      const previous = this.placement.now().primary;
      if (!outranks(record, this.placement.epoch(), previous) || record.Primary === this.deps.config.datacenter) return;
      await this.changeSide(() => this.deps.store.transact((tx) => tx.putMeta(META.placement, record)));
      this.deps.onEvent?.('primary-followed', { Primary: record.Primary, Epoch: record.Epoch, Previous: previous });
    });
  }

  /** PUT /v1/operator/primary?promote (docs/datacenters.md): this secondary datacenter becomes the primary (primary-moves.ts). */
  promote(force: boolean): Promise<PromotionResponse> {
    return this.serially(() => this.moves.promote(force));
  }

  /** A planned transfer reached this datacenter over the replication stream: it becomes the primary. */
  takeHandover(from: string, epoch: number, upTo: number): void {
    void this.serially(() => this.moves.takeHandover(from, epoch, upTo)).catch((err: unknown) =>
      this.deps.logger.error({ err }, 'taking over the primary role failed; this datacenter stays a secondary'),
    );
  }

  /** POST /v1/operator/raft/transfer-leader (docs/servers.md): this datacenter's leadership handed to a synchronous follower. */
  transferLeader(to: string | undefined, by: string): Promise<TransferLeaderResponse> {
    const group = this.group;
    if (!group)
      throw new WatchwordError('INVALID_REQUEST', 'this datacenter runs one server (no coordinator): there is no leadership to hand over');
    const { config, transport, onEvent } = this.deps;
    return handOverLeadership(
      {
        group,
        config,
        transport,
        isPrimary: () => this.side.kind === 'primary',
        replicationStatus: () => this.replicationStatus(),
        leaderClient: () => this.leaderClient(),
        audit: (details) => onEvent?.('leader-transferred', details),
      },
      to,
      by,
    );
  }

  /** PUT /v1/operator/primary?transfer=DC at the primary's leader (docs/datacenters.md): a planned handover (primary-moves.ts). */
  transfer(target: string): Promise<PromotionResponse> {
    return this.serially(() => this.moves.transfer(target));
  }

  staleSeen(): void {
    if (this.leading) this.finder.poke();
  }

  /**
   * A change of side written and taken (called one change at a time): this side's replication
   * stopped, the change written, the side it names taken and its replication started. Should the
   * write fail (a disk error), the side held goes on replicating.
   */
  private async changeSide(write: () => Promise<unknown>): Promise<void> {
    if (this.leading) await this.side.stopReplication();
    try {
      await write();
    } catch (err) {
      if (this.leading && !this.stopped) await this.side.startReplication();
      throw err;
    }
    this.takeStanding();
    if (this.leading && !this.stopped) await this.side.startReplication();
  }

  /** GET /v1/internal/primary: the primary this datacenter follows (or itself), its epoch, and how it is reached. */
  placementAnswer(): PrimaryPlacementResponse {
    const now = this.placement.now();
    return {
      Datacenter: this.deps.config.datacenter,
      Primary: now.primary,
      Epoch: this.placement.epoch(),
      Addresses: now.isPrimary ? [this.deps.transport.peerURL(this.deps.advertised())] : [...now.addresses],
    };
  }

  isLeader(): boolean {
    return this.several ? (this.group?.isLeader() ?? false) : true;
  }

  writeTarget(): FollowerHooks | undefined {
    if (!this.several) return undefined;
    const group = this.group;
    if (!group)
      throw new WatchwordError('NO_LEADER', `no leader is known in datacenter ${this.deps.config.datacenter} yet; try again shortly`);
    const leader = this.leaderClient();
    if (leader) return { leader, sending: () => this.sendingToLeader() };
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
  async throughLeader(): Promise<boolean> {
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
  private async leaderBarrier(leader: PeerClient): Promise<void> {
    const index = await leader.currentIndex(2000);
    if (!(await this.waitForLocalIndex(index, 2500))) {
      throw new WatchwordError(
        'NO_LEADER',
        `this server has not caught up with its leader (index ${index}); try again or read without ?consistent`,
      );
    }
  }

  checkChosenIDs(ids: { accessor?: string; secret?: string }, local: boolean): Promise<void> {
    return this.side.checkChosenIDs(ids, local);
  }

  replicationStatus(): ReplicationStatusResponse {
    return this.side.replicationStatus();
  }

  primarySilentForMs(): number | undefined {
    return this.side.primarySilentForMs();
  }

  usesWritten(uses: ReadonlyArray<readonly [string, number]>): void {
    this.side.usesWritten(uses);
  }

  reportedDatacenters(): DatacenterInfo[] {
    return this.side.reportedDatacenters();
  }

  knownLeader(): boolean {
    return this.side.knownLeader();
  }

  lastContactMs(): number {
    return this.side.lastContactMs();
  }

  /** GET /v1/operator/primary: at the primary, itself; at a secondary, the primary it follows. */
  primaryStatus(): OperatorPrimaryResponse {
    return this.side.primaryStatus();
  }

  leaderAddress(): string {
    // A server that cannot reach the coordinator knows no leader, not its own stale record.
    return !this.group || this.group.isLeader() ? this.deps.advertised() : (this.group.provenLeader()?.address ?? '');
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
          ...releaseColumns(selfRelease(config.node_name)),
        },
      ],
      AnsweredBy: config.node_name,
    };
  }

  /** The header naming the leader on a follower's refusals: only a leader this server has proven. */
  leaderHeader(): Record<string, string> {
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
    this.side.upgradeReplication(req, socket, head);
  }
}
