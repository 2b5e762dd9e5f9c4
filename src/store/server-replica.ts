import type { Level } from 'level';
import { WatchwordError } from '../domain/errors.js';
import { type DecodedPair, decodePair } from './disk-format.js';
import type { Applied, CommittedState } from './committed-state.js';
import { decodeRaw } from './records.js';
import { META } from './schema.js';
import type { GroupCommitter } from './group-commit.js';
import type { StoreSwitch } from './install.js';
import type { ServerBatch, ServerPosition, ServerSnapshotIntake } from './store.js';
import type { WriteRecovery } from './write-recovery.js';

/** What the replica reads of the store it lives in (held by reference: the store's core). */
export interface ReplicaHost {
  /** The database of the moment. */
  readonly db: Level<string, Uint8Array>;
  readonly state: CommittedState;
  readonly recovery: Pick<WriteRecovery, 'writeReplica' | 'checkWritable'>;
  /** Batches written here: the store's own batch numbers continue after them. */
  readonly committer: Pick<GroupCommitter, 'continueAfter'>;
  /** Its leader's snapshot is staged beside the store and made current there. */
  readonly switcher: Pick<StoreSwitch, 'stage' | 'install'>;
  /** Changes applied to memory: shown to readers (indexes, the change log's tail, waiters and listeners). */
  show(applied: Applied): void;
}

/**
 * A server's physical replica of its datacenter's leader (docs/servers.md, "Several servers per
 * datacenter"): the leader's batches written verbatim and shown once the leader commits them,
 * its snapshot taken into a staged store, and (at the leader) the store's whole state read as
 * one consistent view. A follower refuses transactions of its own.
 */
export class ServerReplica {
  private follower = false;
  /** Batches durable here that the leader has not committed yet, decoded, oldest first (not shown to readers). */
  private uncommitted: Array<{ seq: number; decoded: DecodedPair[] }> = [];
  /** The leader committed every batch up to this one. */
  private commitLimit = 0;

  constructor(private readonly store: ReplicaHost) {}

  get isFollower(): boolean {
    return this.follower;
  }

  /** Becomes a follower, or stops being one: a follower becoming leader shows what it holds (its batch log now, committed or not). */
  setFollower(follower: boolean): void {
    if (this.follower && !follower) this.commit(Number.MAX_SAFE_INTEGER);
    this.follower = follower;
  }

  /** Whether batches are durable here that readers are not shown yet (memory is not what LevelDB holds). */
  holdsUncommitted(): boolean {
    return this.uncommitted.length > 0;
  }

  /** The store's state was replaced (an install): what was uncommitted of the old one is gone. */
  replaced(): void {
    this.uncommitted = [];
  }

  /**
   * Writes its leader's batches verbatim in one atomic batch (their own position keys
   * included, so a crash resumes exactly), then shows those the leader committed. Every record
   * is checked before anything is written.
   */
  async apply(batches: ServerBatch[]): Promise<void> {
    if (!this.follower) throw new WatchwordError('INTERNAL', "only a follower applies its leader's batches");
    this.store.recovery.checkWritable();
    const last = batches[batches.length - 1];
    if (!last) return;
    const decoded = batches.map((b) => ({ seq: b.seq, decoded: b.ops.map(([k, v]) => decodePair(k, v)) }));
    const batch = this.store.db.batch();
    for (const b of batches) for (const [k, v] of b.ops) v === null ? batch.del(k) : batch.put(k, v);
    await this.store.recovery.writeReplica(batch);
    this.store.committer.continueAfter(last.seq);
    this.store.state.seq = last.seq;
    this.store.state.term = last.term;
    // Durable (the leader may count on it), but shown to readers only once the leader committed it:
    // a batch its leader never acknowledged may not be in the next leader's batch log.
    for (const d of decoded) this.uncommitted.push(d);
    this.commit(this.commitLimit);
  }

  /** The leader committed every batch up to `seq`: those held here are shown. */
  commit(seq: number): void {
    this.commitLimit = Math.max(this.commitLimit, seq);
    let n = 0;
    while (n < this.uncommitted.length && (this.uncommitted[n] as { seq: number }).seq <= this.commitLimit) n++;
    if (n === 0) return;
    const ready = this.uncommitted.splice(0, n);
    this.store.show(this.store.state.applyPairs(ready.flatMap((r) => r.decoded)));
  }

  /**
   * At the leader: every key of the store as one consistent view (LevelDB iterators read a
   * snapshot), in chunks of about `chunkBytes`; the view's batch position comes last.
   */
  async *snapshot(chunkBytes: number): AsyncGenerator<Array<[string, Uint8Array]>, ServerPosition> {
    const it = this.store.db.iterator({ highWaterMarkBytes: chunkBytes });
    let seq = 0;
    let term = 0;
    try {
      let chunk: Array<[string, Uint8Array]> = [];
      let bytes = 0;
      for (let entries = await it.nextv(5000); entries.length > 0; entries = await it.nextv(5000)) {
        for (const [k, v] of entries) {
          if (k === META.probe) continue;
          if (k === META.serverSeq) seq = Number(decodeRaw(v));
          if (k === META.serverTerm) term = Number(decodeRaw(v));
          chunk.push([k, v]);
          bytes += k.length + v.length;
          if (bytes >= chunkBytes) {
            yield chunk;
            chunk = [];
            bytes = 0;
          }
        }
      }
      if (chunk.length > 0) yield chunk;
    } finally {
      await it.close();
    }
    return { seq, term };
  }

  /**
   * Takes its leader's snapshot piece by piece into a staged store (keys as the leader holds
   * them, each checked), then makes it current: the leader's batch log replaces this one,
   * indexes follow it even backward.
   */
  async intake(): Promise<ServerSnapshotIntake> {
    if (!this.follower) throw new WatchwordError('INTERNAL', 'only a follower installs a snapshot');
    const staged = await this.store.switcher.stage();
    return {
      add: async (pairs) => {
        for (const [k, v] of pairs) if (k !== META.probe && k !== META.datacenter) await staged.putPair(k, v);
      },
      install: async (position) => {
        if (!this.follower) throw new WatchwordError('INTERNAL', 'only a follower installs a snapshot');
        const datacenter = this.store.state.meta.get(META.datacenter);
        await this.store.switcher.install(staged, {
          indexesMayGoBack: true,
          logReset: true,
          complete: (s) => {
            if (datacenter !== undefined) s.putMeta(META.datacenter, datacenter);
            s.putMeta(META.serverSeq, position.seq);
            s.putMeta(META.serverTerm, position.term);
          },
        });
        this.commitLimit = Math.max(this.commitLimit, position.seq);
      },
      abandon: () => staged.abandon(),
    };
  }

  /** Its leader's snapshot given whole (tests; the stream takes it piece by piece, `intake`). */
  async installWhole(pairs: Array<[string, Uint8Array]>, position: ServerPosition): Promise<void> {
    const intake = await this.intake();
    try {
      await intake.add(pairs);
      await intake.install(position);
    } catch (err) {
      await intake.abandon();
      throw err;
    }
  }
}
