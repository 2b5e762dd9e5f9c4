import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ReplicationStatusResponse } from '../api/schemas.js';
import { WatchwordError, conflict, isWatchwordError } from '../domain/errors.js';
import { isUUID } from '../domain/ids.js';
import type { SecondaryHooks } from './hooks.js';
import type { DatacenterInfo } from '../replication/protocol.js';
import { PeerClient } from '../transport/peer-client.js';
import { refuse } from '../transport/refuse.js';
import { PrimaryContact } from '../replication/primary-contact.js';
import { ReplicationSecondary } from '../replication/secondary.js';
import type { RoleDeps } from './cluster-role.js';
import { DatacenterRole, notReplicating } from './datacenter-role.js';
import { epochSeenBy } from '../replication/apply.js';

/** A secondary datacenter's server: when it leads, it replicates from the primary. */
export class SecondaryRole extends DatacenterRole {
  readonly kind = 'secondary';
  readonly secondary: SecondaryHooks;
  private replication: ReplicationSecondary | undefined;
  private readonly primary: PeerClient;
  /** When the primary was last heard, directly or through the leader: outlives every role change. */
  private readonly contact = new PrimaryContact();

  constructor(
    deps: RoleDeps,
    private readonly primaryAddresses: readonly string[],
  ) {
    super(deps);
    this.contact.onHeardDirectly(() => this.group?.relayPrimaryContact());
    const { store, config } = deps;
    this.primary = new PeerClient(
      primaryAddresses.join(','),
      config.primary_datacenter,
      deps.transport.fetcher({ datacenter: config.primary_datacenter }),
    );
    const waitForApplied = (index: number, timeoutMs: number) =>
      this.replication?.waitForApplied(index, timeoutMs) ?? Promise.resolve(false);
    this.secondary = {
      primary: this.primary,
      isLocalToken: async (id: string) => isUUID(id) && store.reader.getToken(id)?.Local === true,
      waitForApplied,
      localView: async (kind, id) => this.ports.localView(kind, id),
      currentIndex: () => store.currentIndex(),
      epochSeen: () => epochSeenBy(store),
    };
    this.beforeConsistentRead = async () => {
      if (await this.throughLeader()) return;
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
      contact: this.contact,
      ...(this.deps.onEvent ? { onEvent: this.deps.onEvent } : {}),
    });
    await this.replication.start();
  }

  /** Uses this leader wrote: those of global tokens go to the primary (README, "Last use"). */
  usesWritten(uses: ReadonlyArray<readonly [string, number]>): void {
    const store = this.deps.store;
    this.replication?.reportUses(uses.filter(([id]) => store.reader.isGlobalToken(id)));
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
    const inUse = async (id: string): Promise<boolean> =>
      (await this.primary.lookupSecret(id, 2000)).found || (isUUID(id) && (await this.primary.accessorExists(id, token, 2000)));
    try {
      if (ids.accessor && (await inUse(ids.accessor))) throw conflict('Invalid Token: AccessorID is already in use');
      if (ids.secret && (await inUse(ids.secret))) throw conflict('Invalid Token: SecretID is already in use');
    } catch (err) {
      if (isWatchwordError(err) && err.code === 'CONFLICT') throw err;
      this.deps.logger.warn({ err: (err as Error).message }, 'cannot check chosen token IDs at the primary; checked here only');
    }
  }

  /**
   * In every state of this server: measured by its replication while it leads, told by its
   * leader with each ping while it follows, and growing from the last of those while it knows no
   * leader (README, "Multiple datacenters", replication_max_stale).
   */
  primarySilentForMs(): number {
    return this.contact.silentForMs();
  }

  protected override replicatingSilence(): number | undefined {
    return this.contact.silentForMs();
  }

  protected override heardOfPrimary(ms: number): void {
    this.contact.heard(ms);
  }

  replicationStatus(): ReplicationStatusResponse {
    // A follower of a secondary datacenter: its leader replicates.
    const status = this.replication?.status() ?? notReplicating(this.deps, []);
    const maxStale = this.deps.config.replication_max_stale;
    if (maxStale <= 0) return status;
    return { ...status, MaxStaleMs: maxStale, RefusingGlobalTokens: this.contact.silentForMs() > maxStale };
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

  protected upgradeReplication(_req: IncomingMessage, socket: Duplex): void {
    const { config } = this.deps;
    // Only the primary serves the replication stream; say so rather than drop the socket.
    refuse(
      socket,
      400,
      `datacenter ${config.datacenter} is a secondary; replication connects to the primary (${config.primary_datacenter}) at ` +
        `${this.primaryAddresses.join(',')}`,
    );
  }
}
