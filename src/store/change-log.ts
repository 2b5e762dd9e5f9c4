import type { Level } from 'level';
import type { BatchOp, GroupCommitter } from './group-commit.js';
import type { LogTail } from './log-tail.js';
import { decodeRaw } from './records.js';
import { LOG_PREFIX, META, logKey, prefixEnd } from './schema.js';
import type { LogEntry } from './store.js';

/**
 * The primary's change log on disk, beside the records it describes (written in the same
 * batches, store/group-commit.ts): its entries read back for a secondary that is behind, and
 * trimmed past the retention, a chunk at a time behind the accepted writes.
 */
export class ChangeLog {
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
   * Removes entries with index <= `upTo`, at most `chunk` per batch so the writer is never held
   * long. Returns how many were removed.
   */
  async trim(upTo: number, chunk: number): Promise<number> {
    if (upTo <= this.store.state.trimmedUpTo) return 0;
    let removed = 0;
    for (;;) {
      const keys: string[] = [];
      for await (const k of this.store.db.keys({ gt: LOG_PREFIX, lte: logKey(upTo), limit: chunk })) keys.push(k);
      // Raw operations queued behind the accepted transactions.
      await new Promise<void>((resolve, reject) => {
        const ops: BatchOp[] = keys.map((k) => ({ type: 'del', key: k }));
        this.store.committer.push({
          ops,
          entryBytes: [],
          tableOps: [],
          meta: [[META.logTrimmed, upTo]],
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
    return removed;
  }
}
