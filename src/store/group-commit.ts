import { isWatchwordError } from '../domain/errors.js';
import type { CommittedChange, CommittedState } from './committed-state.js';
import type { LayerEntry } from './memory.js';
import { encode } from './records.js';
import { META } from './schema.js';
import type { AuditGroupEvent, AuditSink, BatchReplicator, Durability, WatchTable } from './store.js';

import type { BatchOp } from './store-tx.js';
export type { BatchOp } from './store-tx.js';

/** A transaction accepted and waiting for its group's write. */
export interface QueuedCommit extends CommittedChange {
  ops: BatchOp[];
  /** Each change-log entry's bytes as written (kept by the log tail instead of the entry). */
  entryBytes: Uint8Array[];
  /** Its audit line's content (the store adds the objects changed and the index, as `raw`). */
  audit?: AuditGroupEvent;
  /** Layer entries this commit put in `pending`, dropped once durable. */
  layer: Array<[string, LayerEntry]>;
  tables: Map<WatchTable, number>;
  sync: boolean;
  /** Told how long its group kept the event loop (TransactOptions.timing). */
  timing?: { ms: number };
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** One atomic write of the disk (LevelDB's chained batch; the simulation's has the same shape). */
export interface WriteBatch {
  put(key: string, value: Uint8Array): unknown;
  del(key: string): unknown;
  write(options: { sync: boolean }): Promise<void>;
  close(): Promise<void>;
}

/** What group commit reads of the store it writes for (held by reference: the store's core, or the simulation's store). */
export interface CommitterHost {
  /** The database of the moment (a swap replaces it). */
  readonly db: { batch(): WriteBatch };
  readonly durability: Durability;
  /**
   * Whether a write waits for the end of the event loop's turn that queued it, so that every
   * transaction accepted in that turn joins its group (default true). The simulation's disks
   * write at once: its seeds' schedules were found that way.
   */
  readonly gatherTurn?: boolean;
  /** Tests only: makes disk writes fail on demand. */
  readonly faults?: { writeError?: () => Error | undefined } | undefined;
  /** Where the committed state stands in the batch log (HA); the writer moves it. */
  readonly state: Pick<CommittedState, 'seq' | 'term'>;
  /** HA leader: copies every group to the followers (undefined otherwise). */
  readonly replicator: BatchReplicator | undefined;
  /** Where the groups' audit lines go (undefined: no audit log). */
  readonly auditSink?: AuditSink | undefined;
  /** A group is on disk (and on the synchronous followers, unless `remoteError`): apply and answer. `seq`: its batch (HA leader). */
  durable(group: QueuedCommit[], remoteError: unknown, seq: number | undefined): void;
  /** A write failed: nothing of `failed` is durable. */
  failed(err: unknown, failed: QueuedCommit[]): void;
}

/**
 * Group commit (as etcd's batch_tx): accepted transactions queue; one writer writes each
 * group as one LevelDB batch with one sync, the highest index and table indexes once per
 * group, and starts the next group's write as soon as one is on disk, before the finished
 * group is applied and answered, so the disk is never idle while work waits. On an HA
 * leader each group is also a numbered batch sent to the followers while it is written.
 */
export class GroupCommitter {
  private queue: QueuedCommit[] = [];
  private writing = false;
  /** Highest batch seq handed out (never reused, even when its write failed). */
  private seq = 0;

  /** Batches up to `seq` are on disk (read at open, written by a follower, installed): the next one follows them. */
  continueAfter(seq: number): void {
    this.seq = Math.max(this.seq, seq);
  }

  constructor(private readonly host: CommitterHost) {}

  /** A write of the queue is due at the end of this turn of the event loop. */
  private due = false;

  push(commit: QueuedCommit): void {
    this.queue.push(commit);
    if (this.host.gatherTurn === false) return void this.flush();
    if (this.writing || this.due) return;
    // Written once the turn that accepted it is over: every request read in the same turn joins
    // the same group (one sync for all of them), instead of the first going alone and the rest
    // waiting a whole write for the next.
    this.due = true;
    setImmediate(() => {
      this.due = false;
      void this.flush();
    });
  }

  /** Whether anything is queued or being written. */
  get busy(): boolean {
    return this.writing || this.due || this.queue.length > 0;
  }

  /** Resolves once every accepted commit has been written (or refused). */
  async drain(): Promise<void> {
    while (this.busy) await new Promise<void>((resolve) => setImmediate(resolve));
  }

  /** Writes a group as one batch; resolves with the followers' error, if they failed it, and the batch's seq (HA leader). */
  private async write(group: QueuedCommit[]): Promise<{ remoteError: unknown; seq?: number }> {
    const { db, state } = this.host;
    const replicator = this.host.replicator;
    // Fencing: a leader that may have lost its lease writes nothing more.
    replicator?.checkLeadership();
    // Enforced auditing: the group's lines are durable before the group is; if they cannot be, it is refused.
    const audit = this.host.auditSink;
    const events = audit ? group.flatMap((c) => (c.audit ? [c.audit] : [])) : [];
    if (audit?.mode === 'enforced' && events.length > 0) await audit.writeGroup(events);
    const building = performance.now();
    // The chained form: several times faster than the array form for big batches.
    const batch = db.batch();
    const pairs: Array<[string, Uint8Array | null]> | undefined = replicator ? [] : undefined;
    const put = (k: string, v: Uint8Array): void => {
      batch.put(k, v);
      pairs?.push([k, v]);
    };
    let index = 0;
    const tables = new Map<WatchTable, number>();
    for (const c of group) {
      for (const op of c.ops) {
        if (op.type === 'put') put(op.key, op.value);
        else {
          batch.del(op.key);
          pairs?.push([op.key, null]);
        }
      }
      index = Math.max(index, c.index);
      for (const [t, idx] of c.tables) tables.set(t, Math.max(tables.get(t) ?? 0, idx));
    }
    if (index > 0) put(META.index, encode(index));
    for (const [t, idx] of tables) put(META.tableIndex(t), encode(idx));
    const injected = this.host.faults?.writeError?.();
    if (injected) {
      void batch.close();
      throw injected;
    }
    const sync = this.host.durability === 'fsync' && group.some((c) => c.sync);
    const built = performance.now() - building;
    for (const c of group) if (c.timing) c.timing.ms += built;
    if (!replicator || !pairs) {
      await batch.write({ sync });
      if (audit?.mode === 'best-effort' && events.length > 0) void audit.writeGroup(events);
      return { remoteError: undefined };
    }
    const seq = ++this.seq;
    const term = replicator.term();
    put(META.serverSeq, encode(seq));
    put(META.serverTerm, encode(term));
    // Sent to the followers while the local write runs; a failure there is reported, not thrown.
    const remote = replicator.replicate({ seq, term, prev: state.seq, ops: pairs }).then(
      () => undefined,
      (err: unknown) => err ?? new Error('replication failed'),
    );
    try {
      await batch.write({ sync: true });
    } catch (err) {
      replicator.localWriteFailed();
      throw err;
    }
    state.seq = seq;
    state.term = term;
    if (audit?.mode === 'best-effort' && events.length > 0) void audit.writeGroup(events);
    return { remoteError: await remote, seq };
  }

  /** The writer: one group at a time, in order. */
  private async flush(): Promise<void> {
    if (this.writing || this.queue.length === 0) return;
    this.writing = true;
    let group = this.queue;
    this.queue = [];
    let writing = this.write(group);
    for (;;) {
      let remoteError: unknown;
      let seq: number | undefined;
      try {
        ({ remoteError, seq } = await writing);
      } catch (err) {
        const failed = [...group, ...this.queue];
        this.queue = [];
        this.writing = false;
        this.host.failed(err, failed);
        return;
      }
      const next = this.queue;
      this.queue = [];
      if (next.length > 0) writing = this.write(next);
      // Fencing at the moment of acknowledging too: a leader whose lease lapsed while the
      // group was being copied keeps it (durable here and on the synchronous set) but
      // acknowledges nothing more; callers learn the outcome is unknown.
      const replicator = this.host.replicator;
      if (remoteError === undefined && replicator) {
        try {
          replicator.checkLeadership();
        } catch (err) {
          remoteError = err;
        }
      }
      this.host.durable(group, remoteError, seq);
      if (next.length === 0) break;
      group = next;
    }
    this.writing = false;
    // Something queued while the last group was applied.
    if (this.queue.length > 0) void this.flush();
  }
}

/** A fenced leader, or an enforced audit log that could not be written, wrote nothing: the refusal is not a disk fault. */
export const isFencing = (err: unknown): boolean => isWatchwordError(err) && (err.code === 'NO_LEADER' || err.code === 'AUDIT_UNAVAILABLE');
