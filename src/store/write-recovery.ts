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

/** What the recovery needs of the store it keeps writable. */
export interface RecoveryPort {
  /** The database of the moment. */
  db(): Level<string, Uint8Array>;
  /** The durable index in memory. */
  durableIndex(): number;
  /** Reads the state again from disk (a batch that failed after reaching LevelDB's log may be there after all). */
  reload(): Promise<void>;
  closed(): boolean;
  durability: Durability;
  faults?: { writeError?: () => Error | undefined };
  /** Told when the store stops and starts accepting writes. */
  onAvailability?: (available: boolean, cause?: unknown) => void;
}

/**
 * A store's writes after a disk error (ENOSPC, EIO, a read-only data dir): refused while the
 * disk fails, retried with backoff by a probe write after reopening LevelDB, accepted again by
 * themselves once it succeeds (README: a failed store write; etcd keeps its backend's recovery
 * apart from its transactions likewise).
 */
export class WriteRecovery {
  private unavailable: { cause: unknown; since: number } | undefined;

  constructor(private readonly port: RecoveryPort) {}

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
    this.port.onAvailability?.(false, err);
    void this.recover();
  }

  /** Refuses a write of a follower's replica (or a staging) while the store recovers or is closed. */
  checkWritable(): void {
    if (this.port.closed()) throw new WatchwordError('INTERNAL', 'store is closed');
    if (this.unavailable) throw storeUnavailable(this.unavailable.cause, true);
  }

  /** A follower's write of its leader's batches or snapshot: a failure starts the recovery. */
  async writeReplica(batch: ReturnType<Level<string, Uint8Array>['batch']>): Promise<void> {
    const injected = this.port.faults?.writeError?.();
    try {
      if (injected) {
        await batch.close();
        throw injected;
      }
      // A chained batch is closed by its write, whether it succeeded or not.
      await batch.write({ sync: this.port.durability === 'fsync' });
    } catch (err) {
      this.writeFailed(err);
      throw storeUnavailable(err, false);
    }
  }

  private async recover(): Promise<void> {
    const port = this.port;
    for (let delay = 100; this.unavailable && !port.closed(); delay = Math.min(delay * 2, 5000)) {
      await new Promise((r) => setTimeout(r, delay).unref());
      if (port.closed()) return;
      try {
        // LevelDB keeps a write error until reopened.
        await port.db().close();
        await port.db().open();
        const injected = port.faults?.writeError?.();
        if (injected) throw injected;
        await port.db().put(META.probe, encode(Date.now()), { sync: port.durability === 'fsync' });
        // A batch that failed after reaching the log may be on disk after all: then read the state again.
        const onDisk = await port.db().get(META.index);
        if (onDisk !== undefined && Number(decodeRaw(onDisk)) !== port.durableIndex()) await port.reload();
        this.unavailable = undefined;
        port.onAvailability?.(true);
      } catch (err) {
        if (this.unavailable) this.unavailable.cause = err;
      }
    }
  }
}
