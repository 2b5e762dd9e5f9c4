import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { OperatorPrimaryResponse, ReplicationStatusResponse } from '../api/schemas.js';
import { conflict } from '../domain/errors.js';
import { primaryEpochOf } from '../replication/apply.js';
import type { DatacenterInfo } from '../replication/protocol.js';
import { ReplicationPrimary } from '../replication/primary.js';
import { refuse } from '../transport/refuse.js';
import { type RoleHost, type Side, notReplicating } from './side.js';

/** The primary datacenter's side: replication is served here while this server leads. */
export class PrimarySide implements Side {
  readonly kind = 'primary';
  readonly secondary = undefined;
  readonly beforeConsistentRead: (() => Promise<void>) | undefined;
  readonly lookupUnknownSecret: ((secret: string, client: string | undefined) => Promise<boolean>) | undefined;
  private replication: ReplicationPrimary | undefined;

  constructor(private readonly host: RoleHost) {
    if (host.several) {
      this.beforeConsistentRead = async () => {
        await host.throughLeader();
      };
      this.lookupUnknownSecret = (secret, client) => {
        // A follower asks its leader: the token may have been created there a moment ago.
        const leader = host.leaderClient();
        return leader ? host.lookups.lookUp(secret, client, leader, (i, t) => host.waitForLocalIndex(i, t)) : Promise.resolve(false);
      };
    }
  }

  async startReplication(): Promise<void> {
    const { store, logger, replication, config, advertised } = this.host.deps;
    const { resolver } = this.host.ports();
    // A stream halted by an unconfirmed change belongs to the leadership that ended.
    if (this.replication?.isHalted) await this.stopReplication();
    // Made at once, with nothing to wait for: a single server's stream is there before it announces its address.
    this.replication ??= new ReplicationPrimary(
      store,
      resolver,
      logger,
      { ...replication, retention: config.log_retention },
      {
        datacenter: config.datacenter,
        address: advertised,
        transport: this.host.deps.transport,
        releases: this.host.releases,
        ...(this.host.deps.onEvent ? { onEvent: this.host.deps.onEvent } : {}),
      },
    );
  }

  async stopReplication(): Promise<void> {
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

  /** Uses this leader wrote: those of global tokens go to every secondary, which keeps the latest (docs/http-api.md, "Last use"). */
  usesWritten(uses: ReadonlyArray<readonly [string, number]>): void {
    this.replication?.usesWritten(uses);
  }

  primarySilentForMs(): number | undefined {
    return undefined;
  }

  replicatingSilence(): number | undefined {
    return undefined;
  }

  heardOfPrimary(): void {}

  replicationStatus(): ReplicationStatusResponse {
    return notReplicating(this.host.deps, this.replication?.secondaries() ?? []);
  }

  reportedDatacenters(): DatacenterInfo[] {
    return this.replication?.datacenters() ?? [];
  }

  knownLeader(): boolean {
    return true;
  }

  lastContactMs(): number {
    return 0;
  }

  handOver(target: string, epoch: number, upTo: number, timeoutMs: number): Promise<string | undefined> {
    return this.replication?.handOver(target, epoch, upTo, timeoutMs) ?? Promise.resolve(undefined);
  }

  /** At the primary: itself, its epoch, its index. */
  primaryStatus(): OperatorPrimaryResponse {
    const { config, store } = this.host.deps;
    return { Datacenter: config.datacenter, Epoch: primaryEpochOf(store), Index: store.currentIndex() };
  }

  upgradeReplication(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    if (this.replication) return void this.replication.upgrade(req, socket, head);
    const leader = this.host.group?.provenLeader();
    const { datacenter } = this.host.deps.config;
    refuse(
      socket,
      421,
      leader
        ? `this server is a follower; the leader of ${datacenter} is ${leader.name} at ${leader.address}`
        : `no leader is known in ${datacenter} yet`,
      this.host.leaderHeader(),
    );
  }
}
