import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { OperatorPrimaryResponse, ReplicationStatusResponse } from '../api/schemas.js';
import { WatchwordError, conflict, isWatchwordError } from '../domain/errors.js';
import { isUUID } from '../domain/ids.js';
import type { SecondaryHooks } from './hooks.js';
import type { DatacenterInfo } from '../replication/protocol.js';
import { PeerClient } from '../transport/peer-client.js';
import { refuse } from '../transport/refuse.js';
import { ReplicationSecondary } from '../replication/secondary.js';
import { epochSeenBy } from '../replication/apply.js';
import type { Standing } from '../replication/placement.js';
import { type RoleHost, type Side, heardEver, notReplicating } from './side.js';

/** A secondary datacenter's side: while this server leads, it replicates from the primary its standing names. */
export class SecondarySide implements Side {
  readonly kind = 'secondary';
  readonly secondary: SecondaryHooks;
  readonly beforeConsistentRead: () => Promise<void>;
  readonly lookupUnknownSecret: (secret: string, client: string | undefined) => Promise<boolean>;
  private replication: ReplicationSecondary | undefined;
  private readonly primary: PeerClient;

  constructor(
    private readonly host: RoleHost,
    private readonly standing: Standing,
  ) {
    const { store, transport } = host.deps;
    // Writes go first to the primary's server this datacenter replicates from (its leader): one hop, and a follower's restart
    // there cuts none short; the other addresses when it cannot be reached.
    this.primary = new PeerClient(standing.addresses.join(','), standing.primary, transport.fetcher({ datacenter: standing.primary }), () =>
      this.replication?.primaryServer(),
    );
    const waitForApplied = (index: number, timeoutMs: number) =>
      this.replication?.waitForApplied(index, timeoutMs) ?? Promise.resolve(false);
    this.secondary = {
      primary: this.primary,
      isLocalToken: async (id: string) => isUUID(id) && store.reader.getToken(id)?.Local === true,
      waitForApplied,
      sending: () => {
        const replication = this.replication;
        return replication ? replication.sending() : async () => 'pending';
      },
      localView: async (kind, id) => host.ports().localView(kind, id),
      currentIndex: () => store.currentIndex(),
      epochSeen: () => epochSeenBy(store),
    };
    this.beforeConsistentRead = async () => {
      if (await host.throughLeader()) return;
      // ?consistent on a secondary: reach the primary's current index first, within 5 s.
      const index = await this.primary.currentIndex(2000);
      if (!(await waitForApplied(index, 2500))) {
        throw new WatchwordError(
          'PRIMARY_UNAVAILABLE',
          `replication has not caught up with the primary (index ${index}); try again or read without ?consistent`,
        );
      }
    };
    this.lookupUnknownSecret = (secret, client) => {
      const leader = host.leaderClient();
      if (leader) return host.lookups.lookUp(secret, client, leader, (i, t) => host.waitForLocalIndex(i, t));
      return host.lookups.lookUp(secret, client, this.primary, waitForApplied);
    };
  }

  async startReplication(): Promise<void> {
    const { store, logger, metrics, config, replication: repl, advertised } = this.host.deps;
    this.replication = new ReplicationSecondary(store, logger, metrics, {
      transport: this.host.deps.transport,
      datacenter: config.datacenter,
      primaryDatacenter: this.standing.primary,
      primaryAddress: this.standing.addresses.join(','),
      ...(config.replication_token ? { token: config.replication_token } : {}),
      address: advertised,
      heartbeatMs: repl.heartbeatMs,
      deadPeerMs: repl.deadPeerMs,
      backoffMinMs: repl.backoffMinMs,
      backoffMaxMs: repl.backoffMaxMs,
      contact: this.host.contact,
      onHandover: (epoch, upTo) => this.host.takeHandover(this.standing.primary, epoch, upTo),
      releases: this.host.releases,
      ...(this.host.deps.onEvent ? { onEvent: this.host.deps.onEvent } : {}),
    });
    await this.replication.start();
  }

  /** Uses this leader wrote: those of global tokens go to the primary (docs/http-api.md, "Last use"). */
  usesWritten(uses: ReadonlyArray<readonly [string, number]>): void {
    const store = this.host.deps.store;
    this.replication?.reportUses(uses.filter(([id]) => store.reader.isGlobalToken(id)));
  }

  async stopReplication(): Promise<void> {
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
    const { config, logger } = this.host.deps;
    const token = config.replication_token;
    if (!local || !token) return;
    const inUse = async (id: string): Promise<boolean> =>
      (await this.primary.lookupSecret(id, 2000)).found || (isUUID(id) && (await this.primary.accessorExists(id, token, 2000)));
    try {
      if (ids.accessor && (await inUse(ids.accessor))) throw conflict('Invalid Token: AccessorID is already in use');
      if (ids.secret && (await inUse(ids.secret))) throw conflict('Invalid Token: SecretID is already in use');
    } catch (err) {
      if (isWatchwordError(err) && err.code === 'CONFLICT') throw err;
      logger.warn({ err: (err as Error).message }, 'cannot check chosen token IDs at the primary; checked here only');
    }
  }

  /**
   * In every state of this server: measured by its replication while it leads, told by its
   * leader with each ping while it follows, and growing from the last of those while it knows no
   * leader (docs/datacenters.md, "Multiple datacenters", replication_max_stale).
   */
  primarySilentForMs(): number {
    return this.host.contact.silentForMs();
  }

  replicatingSilence(): number | undefined {
    return this.host.contact.silentForMs();
  }

  heardOfPrimary(ms: number): void {
    this.host.contact.heard(ms);
  }

  replicationStatus(): ReplicationStatusResponse {
    // A follower of a secondary datacenter: its leader replicates.
    const status = this.replication?.status() ?? notReplicating(this.host.deps, []);
    const maxStale = this.host.deps.config.replication_max_stale;
    if (maxStale <= 0) return status;
    return { ...status, MaxStaleMs: maxStale, RefusingGlobalTokens: this.host.contact.silentForMs() > maxStale };
  }

  reportedDatacenters(): DatacenterInfo[] {
    return this.replication?.datacenters() ?? [];
  }

  knownLeader(): boolean {
    return this.replication?.isConnected() ?? false;
  }

  lastContactMs(): number {
    return this.replication?.lastContactMs() ?? 0;
  }

  /** The primary it follows as its replication reports it: the epoch seen, the index applied here, when it was last heard. */
  primaryStatus(): OperatorPrimaryResponse {
    const status = this.replicationStatus();
    return {
      Datacenter: this.standing.primary,
      Epoch: epochSeenBy(this.host.deps.store),
      Index: status.ReplicatedIndex,
      ...(heardEver(status) ? { LastContact: new Date(Date.now() - status.LastContactMs).toISOString() } : {}),
    };
  }

  followed(): { index: number; connected: boolean } {
    return { index: this.replication?.appliedIndex() ?? 0, connected: this.replication?.isConnected() ?? false };
  }

  upgradeReplication(_req: IncomingMessage, socket: Duplex): void {
    const { config } = this.host.deps;
    // Only the primary serves the replication stream; say so rather than drop the socket.
    refuse(
      socket,
      400,
      `datacenter ${config.datacenter} is a secondary; replication connects to the primary (${this.standing.primary}) at ` +
        `${this.standing.addresses.join(',')}`,
    );
  }
}
