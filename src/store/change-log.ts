import type { Level } from 'level';
import type { BatchOp, GroupCommitter } from './group-commit.js';
import type { LogTail } from './log-tail.js';
import { compactRange } from './level-extras.js';
import { decodeRaw, encode } from './records.js';
import { LOG_PREFIX, META, logIndexOf, logKey, prefixEnd } from './schema.js';
import type { LogEntry } from './store.js';

/** Trimmed entries after which the trimmed range is compacted (a few MB of tombstones). */
const COMPACT_AFTER = 20_000;

/**
 * The primary's change log on disk, beside the records it describes (written in the same
 * batches, store/group-commit.ts): its entries read back for a secondary that is behind, and
 * trimmed past the retention, a chunk at a time behind the accepted writes.
 */
export class ChangeLog {
  /** Entries trimmed since the trimmed range was last compacted. */
  private uncompacted = 0;

  constructor(
    /** The store's core, held by reference. */
    private readonly store: {
      readonly db: Level<string, Uint8Array>;
      readonly committer: Pick<GroupCommitter, 'push'>;
      readonly logTail: Pick<LogTail, 'after'>;
      /** `trimmedUpTo`: entries up to here were removed. */
      readonly state: { trimmedUpTo: number };
    },
  ) {}

  /** Entries after `index`, up to `limit`: from memory when recent, else from disk. */
  async after(index: number, limit: number): Promise<LogEntry[]> {
    const recent = this.store.logTail.after(index, limit);
    if (recent) return recent;
    const out: LogEntry[] = [];
    for await (const [, value] of this.store.db.iterator({ gt: logKey(index), lt: prefixEnd(LOG_PREFIX), limit })) {
      out.push(decodeRaw(value) as LogEntry);
    }
    return out;
  }

  /**
   * At open: the trimmed mark no lower than the first entry on disk says. A release before the mark
   * was written to disk kept it in memory only, so after a restart a secondary behind the trimmed
   * entries would be sent the entries after the gap instead of a snapshot.
   */
  async markFromDisk(): Promise<void> {
    const [first] = await this.store.db.keys({ gt: LOG_PREFIX, lt: prefixEnd(LOG_PREFIX), limit: 1 }).all();
    if (first !== undefined) this.store.state.trimmedUpTo = Math.max(this.store.state.trimmedUpTo, logIndexOf(first) - 1);
  }

  /**
   * Removes entries with index <= `upTo`, at most `chunk` per batch so the writer is never held
   * long. Returns how many were removed.
   */
  async trim(upTo: number, chunk: number): Promise<number> {
    const from = this.store.state.trimmedUpTo;
    if (upTo <= from) return 0;
    let removed = 0;
    // From the last trim on: the entries before it are deleted, and a read from the prefix would step over each one's tombstone.
    let after = from > 0 ? logKey(from) : LOG_PREFIX;
    for (;;) {
      const keys: string[] = [];
      for await (const k of this.store.db.keys({ gt: after, lte: logKey(upTo), limit: chunk })) keys.push(k);
      after = keys[keys.length - 1] ?? after;
      // What the batch leaves trimmed: all up to `upTo` once the range is done, else up to its last entry (a stop
      // between chunks leaves the mark where the deletions reached, so the next trim starts there).
      const reached = keys.length < chunk ? upTo : logIndexOf(after);
      // Raw operations queued behind the accepted transactions.
      await new Promise<void>((resolve, reject) => {
        const ops: BatchOp[] = keys.map((k) => ({ type: 'del', key: k }));
        // The mark on disk too: after a restart a secondary behind it must be sent a snapshot, not the entries after a gap.
        ops.push({ type: 'put', key: META.logTrimmed, value: encode(reached) });
        this.store.committer.push({
          ops,
          entryBytes: [],
          tableOps: [],
          meta: [[META.logTrimmed, reached]],
          layer: [],
          index: 0,
          tables: new Map(),
          entries: [],
          sync: false,
          resolve,
          reject,
        });
      });
      removed += keys.length;
      if (keys.length < chunk) break;
    }
    this.store.state.trimmedUpTo = upTo;
    // The trimmed range is contiguous and holds nothing else: compacted, its tombstones leave the disk with it. Once
    // enough are trimmed, not at every trim (a primary trims up to once a second).
    this.uncompacted += removed;
    if (this.uncompacted >= COMPACT_AFTER) {
      this.uncompacted = 0;
      await compactRange(this.store.db, LOG_PREFIX, logKey(upTo + 1));
    }
    return removed;
  }
}
