import type { Level } from 'level';
import { WatchwordError } from '../domain/errors.js';
import { decodeRaw, encode } from './records.js';
import { META } from './schema.js';
import type { Durability } from './store.js';
import { causeText, storeUnavailable } from './write-errors.js';

/** The store's writable state: ok, or refusing writes while it recovers from a write error. */
export interface StoreHealth {
  available: boolean;
  /** What the last failed write said. */
  lastError?: string;
  /** When writes started failing, ms since the epoch. */
  since?: number;
}

/** What the recovery reads of the store it keeps writable (held by reference: the store's core). */
export interface RecoveryHost {
  /** The database of the moment. */
  readonly db: Level<string, Uint8Array>;
  /** The durable index in memory. */
  readonly state: { readonly index: number };
  /** Reads the state again from disk (a batch that failed after reaching LevelDB's log may be there after all). */
  reload(): Promise<unknown>;
  readonly closed: boolean;
  readonly options: {
    durability: Durability;
    faults?: { writeError?: () => Error | undefined };
    /** Told when the store stops and starts accepting writes. */
    onAvailability?: (available: boolean, cause?: unknown) => void;
  };
}

/**
 * A store's writes after a disk error (ENOSPC, EIO, a read-only data dir): refused while the
 * disk fails, retried with backoff by a probe write after reopening LevelDB, accepted again by
 * themselves once it succeeds (README: a failed store write; etcd keeps its backend's recovery
 * apart from its transactions likewise).
 */
export class WriteRecovery {
  private unavailable: { cause: unknown; since: number } | undefined;

  constructor(private readonly store: RecoveryHost) {}

  /** Why writes are refused now (undefined: they are not). */
  get failing(): { cause: unknown } | undefined {
    return this.unavailable;
  }

  health(): StoreHealth {
    const u = this.unavailable;
    return u ? { available: false, lastError: causeText(u.cause), since: u.since } : { available: true };
  }

  /**
   * A LevelDB write failed: nothing is written again before the database is reopened.
   * LevelDB's log writer does not survive a failed append (a full disk): its idea of where
   * its blocks start no longer matches the file, and every record it appends afterwards,
   * though the write reports success and is synced, is unreadable at the next open (a
   * full disk then freed, without a reopen: 2,802 of 3,000 acknowledged writes gone).
   */
  writeFailed(err: unknown): void {
    if (this.unavailable) return;
    this.unavailable = { cause: err, since: Date.now() };
    this.store.options.onAvailability?.(false, err);
    void this.recover();
  }

  /** Refuses a write of a follower's replica (or a staging) while the store recovers or is closed. */
  checkWritable(): void {
    if (this.store.closed) throw new WatchwordError('INTERNAL', 'store is closed');
    if (this.unavailable) throw storeUnavailable(this.unavailable.cause, true);
  }

  /** A follower's write of its leader's batches or snapshot: a failure starts the recovery. */
  async writeReplica(batch: ReturnType<Level<string, Uint8Array>['batch']>): Promise<void> {
    const injected = this.store.options.faults?.writeError?.();
    try {
      if (injected) {
        await batch.close();
        throw injected;
      }
      // A chained batch is closed by its write, whether it succeeded or not.
      await batch.write({ sync: this.store.options.durability === 'fsync' });
    } catch (err) {
      this.writeFailed(err);
      throw storeUnavailable(err, false);
    }
  }

  private async recover(): Promise<void> {
    const store = this.store;
    for (let delay = 100; this.unavailable && !store.closed; delay = Math.min(delay * 2, 5000)) {
      await new Promise((r) => setTimeout(r, delay).unref());
      if (store.closed) return;
      try {
        // LevelDB keeps a write error until reopened.
        await store.db.close();
        await store.db.open();
        const injected = store.options.faults?.writeError?.();
        if (injected) throw injected;
        await store.db.put(META.probe, encode(Date.now()), { sync: store.options.durability === 'fsync' });
        // A batch that failed after reaching the log may be on disk after all: then read the state again.
        const onDisk = await store.db.get(META.index);
        if (onDisk !== undefined && Number(decodeRaw(onDisk)) !== store.state.index) await store.reload();
        this.unavailable = undefined;
        store.options.onAvailability?.(true);
      } catch (err) {
        if (this.unavailable) this.unavailable.cause = err;
      }
    }
  }
}
