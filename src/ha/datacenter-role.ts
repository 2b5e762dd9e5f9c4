import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { primaryPlacementResponse } from '../api/schemas.js';
import type {
  OperatorPrimaryResponse,
  OperatorServersResponse,
  PrimaryPlacementResponse,
  PromotionResponse,
  ReplicationStatusResponse,
} from '../api/schemas.js';
import { WatchwordError, conflict, invalid } from '../domain/errors.js';
import type { FollowerHooks, SecondaryHooks } from './hooks.js';
import type { DatacenterInfo } from '../replication/protocol.js';
import { REPLICATION_PATH } from '../replication/protocol.js';
import { type Cursor, primaryEpochOf } from '../replication/apply.js';
import { type Placement, type PlacementRecord, type Standing } from '../replication/placement.js';
import { PrimaryContact } from '../replication/primary-contact.js';
import { META } from '../store/schema.js';
import { PeerClient } from '../transport/peer-client.js';
import { refuse } from '../transport/refuse.js';
import { type Coordinator, EtcdCoordinator, StaticCoordinator } from './coordinator.js';
import type { ClusterRole, RoleDeps, RoleParts } from './cluster-role.js';
import { PrimaryFinder, outranks } from './primary-finder.js';
import { PrimarySide } from './primary-role.js';
import { SecondarySide } from './secondary-role.js';
import { SecretLookup, waitForIndex } from './secret-lookup.js';
import { SERVERS_PATH } from './server-protocol.js';
import { ServerGroup } from './servers.js';
import type { RoleHost, Side } from './side.js';

/** How long a planned transfer waits for the target to have everything (the write pause is at most this and the handover). */
const TRANSFER_CATCH_UP_MS = 10_000;
/** How long it waits for the target to say it took the role. */
const TRANSFER_CONFIRM_MS = 5_000;

/**
 * A server's place (README, "Multiple datacenters" and "Several servers per datacenter"): the
 * servers of its datacenter and which leads them, and its datacenter's side, primary or
 * secondary. The side can change while the server runs (SPEC §21): a promotion, a handover, or a
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
  private unwatch: (() => void) | undefined;

  /** The services' parts, from start() on. */
  private parts: RoleParts | undefined;

  ports(): RoleParts {
    if (this.parts === undefined) throw new Error('the cluster role is used before it started');
    return this.parts;
  }

  /** Several servers in this datacenter (the group itself is made once HTTP listens). */
  readonly several: boolean;

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
    this.contact.onHeardDirectly(() => this.group?.relayPrimaryContact());
    // Several servers: nothing is written here until the coordinator says this server leads.
    if (this.several) deps.store.setFollower(true);
    this.standing = placement.now();
    this.side = this.sideFor(this.standing);
    deps.store.setChangeLog(this.standing.isPrimary);
    this.finder = new PrimaryFinder({
      datacenter: deps.config.datacenter,
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
   * A primary of a newer epoch, learned from a peer (SPEC §21): written down first (a restart
   * follows it too), then followed. A returning old primary stops taking global writes here.
   */
  private async followNewer(record: PlacementRecord): Promise<void> {
    const previous = this.placement.now().primary;
    if (!outranks(record, this.placement.epoch(), previous) || record.Primary === this.deps.config.datacenter) return;
    await this.deps.store.transact((tx) => tx.putMeta(META.placement, record));
    this.deps.onEvent?.('primary-followed', { Primary: record.Primary, Epoch: record.Epoch, Previous: previous });
    await this.takeSide();
  }

  /**
   * PUT /v1/operator/primary?promote (SPEC §21): this secondary datacenter becomes the primary,
   * with the epoch after the highest seen, from what it has applied. The answer (and the audit
   * line) name the recovery point: the previous primary's last index applied here, and when it
   * was last heard.
   */
  promote(force: boolean): Promise<PromotionResponse> {
    return this.serially(async () => {
      const { config, replication } = this.deps;
      const standing = this.placement.now();
      this.mayBecomePrimary();
      const followed = this.followedIndex();
      const silentMs = this.contact.silentForMs();
      const hears = followed.connected && silentMs < replication.deadPeerMs;
      if (hears && !force)
        throw conflict(
          `datacenter ${config.datacenter} still hears the primary ${standing.primary} (last frame ${silentMs} ms ago): promoting ` +
            `now would leave two primaries until it is fenced. Transfer the role at the primary instead (PUT ` +
            `/v1/operator/primary?transfer=${config.datacenter}), or promote with -force (?promote&force) if it must go`,
        );
      return this.becomePrimary(this.placement.epoch() + 1, followed.index, hears, false);
    });
  }

  /** A planned transfer reached this datacenter over the replication stream: it has everything, and becomes the primary. */
  takeHandover(from: string, epoch: number, upTo: number): void {
    void this.serially(async () => {
      if (this.placement.now().primary !== from || epoch <= this.placement.epoch()) return;
      this.mayBecomePrimary();
      await this.becomePrimary(epoch, Math.max(upTo, this.followedIndex().index), false, true);
    }).catch((err: unknown) => this.deps.logger.error({ err }, 'taking over the primary role failed; this datacenter stays a secondary'));
  }

  private mayBecomePrimary(): void {
    const { config, store } = this.deps;
    if (this.placement.now().isPrimary)
      throw conflict(
        `datacenter ${config.datacenter} is already the primary (epoch ${primaryEpochOf(store)}); there is nothing to promote`,
      );
    if (this.several && !this.isLeader())
      throw new WatchwordError(
        'NO_LEADER',
        `this server does not lead datacenter ${config.datacenter}; ask its leader (${this.leaderAddress() || 'none known yet'})`,
      );
  }

  /** The previous primary's last index applied here, and whether it is connected now. */
  private followedIndex(): { index: number; connected: boolean } {
    const cursorIndex = (this.deps.store.getMeta(META.cursor) as Cursor | undefined)?.index ?? 0;
    const followed = this.side.followed?.() ?? { index: cursorIndex, connected: false };
    return { index: Math.max(followed.index, cursorIndex), connected: followed.connected };
  }

  /** This datacenter is the primary from now on, with `epoch` (called one change at a time). */
  private async becomePrimary(epoch: number, index: number, forced: boolean, planned: boolean): Promise<PromotionResponse> {
    const { config, store } = this.deps;
    const dc = config.datacenter;
    const previous = this.placement.now().primary;
    const cursor = store.getMeta(META.cursor) as Cursor | undefined;
    // When it was last heard: since this server started, else when its last frame was applied (the cursor says).
    const heard = this.side.primaryStatus().LastContact ?? (cursor?.at !== undefined ? new Date(cursor.at).toISOString() : undefined);
    const report: PromotionResponse = {
      Datacenter: dc,
      Epoch: epoch,
      PreviousPrimary: previous,
      PreviousEpoch: this.placement.epoch(),
      LastIndex: index,
      ...(heard ? { LastContact: heard } : {}),
      Forced: forced,
      Warning: planned
        ? `A planned transfer from ${previous}: it sent every write it had acknowledged (up to its index ${index}) first; nothing was lost.`
        : `Global writes (tokens, policies, roles, auth methods, binding rules) that ${previous} acknowledged after its index ` +
          `${index}${heard ? ` (last heard here at ${heard})` : ''} never reached ${dc} and may be lost; ${previous} writes ` +
          `them to its audit log when it returns and rejoins as a secondary.`,
    };
    if (this.leading) await this.side.stopReplication();
    await this.orResume(() =>
      store.transact((tx) => {
        tx.putMeta(META.placement, {
          Primary: dc,
          Epoch: epoch,
          Addresses: [],
          Took: { From: previous, Epoch: report.PreviousEpoch, Index: index, ...(cursor?.logID ? { Log: cursor.logID } : {}) },
        } satisfies PlacementRecord);
        tx.putMeta(META.primaryEpoch, epoch);
        // A log of its own from here: every secondary starts from a snapshot of this datacenter.
        tx.resetLog(randomUUID());
      }),
    );
    this.deps.onEvent?.('primary-promoted', { ...report, Planned: planned });
    this.takeStanding();
    if (this.leading && !this.stopped) await this.side.startReplication();
    return report;
  }

  /** Whether `target` (at `url`) says, within a few seconds, that it is the primary at `epoch` (a handover taken). */
  private async confirmsTakeover(target: string, url: string, epoch: number): Promise<boolean> {
    const peer = new PeerClient(url, target, this.deps.transport.fetcher({ datacenter: target }));
    const deadline = Date.now() + TRANSFER_CONFIRM_MS;
    while (Date.now() < deadline) {
      try {
        const res = await peer.request('GET', '/v1/internal/primary', {}, undefined, 1000);
        const said = res.status === 200 ? primaryPlacementResponse.safeParse(JSON.parse(res.text)) : undefined;
        if (said?.success && said.data.Primary === target && said.data.Epoch >= epoch) return true;
      } catch {
        // not reached this time; asked again
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    return false;
  }

  staleSeen(): void {
    if (this.leading) this.finder.poke();
  }

  /** Writes a change of side; should it fail (a disk error), the side's replication, stopped for it, runs again. */
  private async orResume(write: () => Promise<unknown>): Promise<void> {
    try {
      await write();
    } catch (err) {
      if (this.leading && !this.stopped) await this.side.startReplication();
      throw err;
    }
  }

  /**
   * PUT /v1/operator/primary?transfer=DC at the primary's leader (SPEC §21): global writes stop here,
   * every one acknowledged is sent to `target` (a connected secondary), which becomes the primary
   * with the next epoch; this datacenter then follows it. Nothing acknowledged is lost, and writes
   * wait for at most the target's catch-up and 2 s.
   */
  transfer(target: string): Promise<PromotionResponse> {
    return this.serially(async () => {
      const { config, store, logger } = this.deps;
      const dc = config.datacenter;
      if (!this.placement.now().isPrimary)
        throw conflict(`datacenter ${dc} is not the primary (it follows ${this.placement.now().primary}); transfer the role there`);
      if (target === dc) throw invalid(`datacenter ${dc} is already the primary`);
      if (this.several && !this.isLeader()) throw new WatchwordError('NO_LEADER', `this server does not lead datacenter ${dc}`);
      if (!config.replication_token)
        throw invalid(
          `datacenter ${dc} becomes a secondary of ${target} and needs a replication token to follow it: set replication_token first`,
        );
      const connected = this.side.replicationStatus().Secondaries?.some((s) => s.Datacenter === target);
      if (!connected) throw conflict(`datacenter ${target} is not a connected secondary of ${dc}; a transfer needs it connected`);
      const epoch = this.placement.epoch() + 1;
      const started = Date.now();
      // Global writes held in the store (Local tokens go on): one already on its way is refused, not lost.
      store.holdWrites(
        new WatchwordError('PRIMARY_TRANSFER', `The primary is handing its role to datacenter ${target}; retry in a moment`, {
          retryAfter: 1,
        }),
      );
      try {
        // Writes accepted before the fence are durable (and in the log) before the last index is read.
        await store.quiesce();
        const upTo = store.currentIndex();
        const address = await this.side.handOver?.(target, epoch, upTo, TRANSFER_CATCH_UP_MS);
        if (address === undefined)
          throw new WatchwordError(
            'PRIMARY_UNAVAILABLE',
            `datacenter ${target} did not take everything up to index ${upTo} in time; ${dc} stays the primary`,
          );
        const url = this.deps.transport.peerURL(address);
        // Not a secondary of anyone until the target says it took the role: else no datacenter would be the primary.
        if (!(await this.confirmsTakeover(target, url, epoch)))
          throw new WatchwordError(
            'PRIMARY_UNAVAILABLE',
            `datacenter ${target} was sent the handover but has not said it took it; ${dc} stays the primary (should ${target} ` +
              `take it late, ${dc} finds its epoch ${epoch} and follows it)`,
          );
        const record: PlacementRecord = { Primary: target, Epoch: epoch, Addresses: [url] };
        if (this.leading) await this.side.stopReplication();
        await this.orResume(() => store.transact((tx) => tx.putMeta(META.placement, record), { pastHold: true }));
        this.deps.onEvent?.('primary-followed', { Primary: target, Epoch: epoch, Previous: dc, Planned: true });
        this.takeStanding();
        if (this.leading && !this.stopped) await this.side.startReplication();
        logger.warn({ target, epoch, upTo, pausedMs: Date.now() - started }, 'the primary role was handed over');
        return {
          Datacenter: target,
          Epoch: epoch,
          PreviousPrimary: dc,
          PreviousEpoch: epoch - 1,
          LastIndex: upTo,
          Forced: false,
          WritesPausedMs: Date.now() - started,
          Warning: `A planned transfer: ${target} took every write ${dc} had acknowledged (up to index ${upTo}); nothing was lost.`,
        };
      } finally {
        store.holdWrites(undefined);
      }
    });
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
