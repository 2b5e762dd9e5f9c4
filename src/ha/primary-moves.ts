import { randomUUID } from 'node:crypto';
import { type PromotionResponse, primaryPlacementResponse } from '../api/schemas.js';
import { WatchwordError, conflict, invalid } from '../domain/errors.js';
import { type Cursor, primaryEpochOf } from '../replication/apply.js';
import type { Placement, PlacementRecord } from '../replication/placement.js';
import type { PrimaryContact } from '../replication/primary-contact.js';
import { META } from '../store/schema.js';
import { PeerClient } from '../transport/peer-client.js';
import type { RoleDeps } from './cluster-role.js';
import type { Side } from './side.js';

/** How long a planned transfer waits for the target to have everything (the write pause is at most this and the handover). */
const TRANSFER_CATCH_UP_MS = 10_000;
/** How long it waits for the target to say it took the role. */
const TRANSFER_CONFIRM_MS = 5_000;

/** What the primary role's moves use of the server's role. */
export interface MovesHost {
  readonly deps: RoleDeps;
  readonly placement: Placement;
  readonly contact: PrimaryContact;
  readonly several: boolean;
  side(): Side;
  isLeader(): boolean;
  leaderAddress(): string;
  /** Writes a change of side and takes it (replication moved over while this server leads). */
  changeSide(write: () => Promise<unknown>): Promise<void>;
}

/**
 * The primary role's two moves (docs/datacenters.md): an emergency promotion of this secondary datacenter,
 * and a planned transfer from this primary to a connected secondary (with the handover's other
 * end). The role runs each one change at a time.
 */
export class PrimaryMoves {
  constructor(private readonly host: MovesHost) {}

  /**
   * PUT /v1/operator/primary?promote (docs/datacenters.md): this secondary datacenter becomes the primary,
   * with the epoch after the highest seen, from what it has applied. The answer (and the audit
   * line) name the recovery point: the previous primary's last index applied here, and when it
   * was last heard.
   */
  async promote(force: boolean): Promise<PromotionResponse> {
    const { config, replication } = this.host.deps;
    const standing = this.host.placement.now();
    this.mayBecomePrimary();
    const followed = this.followedIndex();
    const silentMs = this.host.contact.silentForMs();
    const hears = followed.connected && silentMs < replication.deadPeerMs;
    if (hears && !force)
      throw conflict(
        `datacenter ${config.datacenter} still hears the primary ${standing.primary} (last frame ${silentMs} ms ago): promoting ` +
          `now would leave two primaries until it is fenced. Transfer the role at the primary instead (PUT ` +
          `/v1/operator/primary?transfer=${config.datacenter}), or promote with -force (?promote&force) if it must go`,
      );
    return this.becomePrimary(this.host.placement.epoch() + 1, followed.index, hears, false);
  }

  /** A planned transfer reached this datacenter over the replication stream: it has everything, and becomes the primary. */
  async takeHandover(from: string, epoch: number, upTo: number): Promise<void> {
    if (this.host.placement.now().primary !== from || epoch <= this.host.placement.epoch()) return;
    this.mayBecomePrimary();
    await this.becomePrimary(epoch, Math.max(upTo, this.followedIndex().index), false, true);
  }

  private mayBecomePrimary(): void {
    const { config, store } = this.host.deps;
    if (this.host.placement.now().isPrimary)
      throw conflict(
        `datacenter ${config.datacenter} is already the primary (epoch ${primaryEpochOf(store)}); there is nothing to promote`,
      );
    if (this.host.several && !this.host.isLeader())
      throw new WatchwordError(
        'NO_LEADER',
        `this server does not lead datacenter ${config.datacenter}; ask its leader (${this.host.leaderAddress() || 'none known yet'})`,
      );
  }

  /** The previous primary's last index applied here, and whether it is connected now. */
  private followedIndex(): { index: number; connected: boolean } {
    const cursorIndex = (this.host.deps.store.getMeta(META.cursor) as Cursor | undefined)?.index ?? 0;
    const followed = this.host.side().followed?.() ?? { index: cursorIndex, connected: false };
    return { index: Math.max(followed.index, cursorIndex), connected: followed.connected };
  }

  /** This datacenter is the primary from now on, with `epoch` (called one change at a time). */
  private async becomePrimary(epoch: number, index: number, forced: boolean, planned: boolean): Promise<PromotionResponse> {
    const { config, store } = this.host.deps;
    const dc = config.datacenter;
    const previous = this.host.placement.now().primary;
    const cursor = store.getMeta(META.cursor) as Cursor | undefined;
    // When it was last heard: since this server started, else when its last frame was applied (the cursor says).
    const heard =
      this.host.side().primaryStatus().LastContact ?? (cursor?.at !== undefined ? new Date(cursor.at).toISOString() : undefined);
    const report: PromotionResponse = {
      Datacenter: dc,
      Epoch: epoch,
      PreviousPrimary: previous,
      PreviousEpoch: this.host.placement.epoch(),
      LastIndex: index,
      ...(heard ? { LastContact: heard } : {}),
      Forced: forced,
      Warning: planned
        ? `A planned transfer from ${previous}: it sent every write it had acknowledged (up to its index ${index}) first; nothing was lost.`
        : `Global writes (tokens, policies, roles, auth methods, binding rules) that ${previous} acknowledged after its index ` +
          `${index}${heard ? ` (last heard here at ${heard})` : ''} never reached ${dc} and may be lost; ${previous} writes ` +
          `them to its audit log when it returns and rejoins as a secondary.`,
    };
    await this.host.changeSide(() =>
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
    this.host.deps.onEvent?.('primary-promoted', { ...report, Planned: planned });
    return report;
  }

  /** Whether `target` (at `url`) says, within a few seconds, that it is the primary at `epoch` (a handover taken). */
  private async confirmsTakeover(target: string, url: string, epoch: number): Promise<boolean> {
    const peer = new PeerClient(url, target, this.host.deps.transport.fetcher({ datacenter: target }));
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

  /**
   * PUT /v1/operator/primary?transfer=DC at the primary's leader (docs/datacenters.md): global writes stop here,
   * every one acknowledged is sent to `target` (a connected secondary), which becomes the primary
   * with the next epoch; this datacenter then follows it. Nothing acknowledged is lost, and writes
   * wait for at most the target's catch-up and 2 s.
   */
  async transfer(target: string): Promise<PromotionResponse> {
    const { config, store, logger } = this.host.deps;
    const dc = config.datacenter;
    if (!this.host.placement.now().isPrimary)
      throw conflict(`datacenter ${dc} is not the primary (it follows ${this.host.placement.now().primary}); transfer the role there`);
    if (target === dc) throw invalid(`datacenter ${dc} is already the primary`);
    if (this.host.several && !this.host.isLeader()) throw new WatchwordError('NO_LEADER', `this server does not lead datacenter ${dc}`);
    if (!config.replication_token)
      throw invalid(
        `datacenter ${dc} becomes a secondary of ${target} and needs a replication token to follow it: set replication_token first`,
      );
    const connected = this.host
      .side()
      .replicationStatus()
      .Secondaries?.some((s) => s.Datacenter === target);
    if (!connected) throw conflict(`datacenter ${target} is not a connected secondary of ${dc}; a transfer needs it connected`);
    const epoch = this.host.placement.epoch() + 1;
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
      const address = await this.host.side().handOver?.(target, epoch, upTo, TRANSFER_CATCH_UP_MS);
      if (address === undefined)
        throw new WatchwordError(
          'PRIMARY_UNAVAILABLE',
          `datacenter ${target} did not take everything up to index ${upTo} in time; ${dc} stays the primary`,
        );
      const url = this.host.deps.transport.peerURL(address);
      // Not a secondary of anyone until the target says it took the role: else no datacenter would be the primary.
      if (!(await this.confirmsTakeover(target, url, epoch)))
        throw new WatchwordError(
          'PRIMARY_UNAVAILABLE',
          `datacenter ${target} was sent the handover but has not said it took it; ${dc} stays the primary (should ${target} ` +
            `take it late, ${dc} finds its epoch ${epoch} and follows it)`,
        );
      const record: PlacementRecord = { Primary: target, Epoch: epoch, Addresses: [url] };
      await this.host.changeSide(() => store.transact((tx) => tx.putMeta(META.placement, record), { pastHold: true }));
      this.host.deps.onEvent?.('primary-followed', { Primary: target, Epoch: epoch, Previous: dc, Planned: true });
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
  }
}
