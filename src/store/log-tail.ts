import { decodeRaw } from './records.js';
import type { LogEntry } from './store.js';

/**
 * The most recent change-log entries, in memory, for secondaries that are nearly current:
 * every entry from `start` on is here (older ones are read from disk). Each is kept as the
 * bytes written to disk and decoded when read, as from disk: a held entry object (with the
 * records it changed) is work for every scavenge while it is held. Trimmed in steps of a
 * quarter, not on every commit: dropping from the front copies the rest.
 */
export class LogTail {
  private indexes: number[] = [];
  private bytes: Uint8Array[] = [];
  /** Every entry with an index at or above this is held. */
  private start = 1;

  constructor(private readonly limit: number) {}

  /** Forget everything: entries from `start` on will be remembered again. */
  reset(start: number): void {
    this.indexes = [];
    this.bytes = [];
    this.start = start;
  }

  /** The entry at `index`, as written to disk. */
  remember(index: number, bytes: Uint8Array): void {
    this.indexes.push(index);
    this.bytes.push(bytes);
    if (this.indexes.length > this.limit + this.limit / 4) {
      const drop = this.indexes.length - this.limit;
      this.start = (this.indexes[drop - 1] as number) + 1;
      this.indexes.splice(0, drop);
      this.bytes.splice(0, drop);
    }
  }

  /** Entries after `index`, up to `limit`, when the tail holds them (undefined: read from disk). */
  after(index: number, limit: number): LogEntry[] | undefined {
    if (index + 1 < this.start) return undefined;
    const tail = this.indexes;
    let lo = 0;
    let hi = tail.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((tail[mid] as number) <= index) lo = mid + 1;
      else hi = mid;
    }
    return this.bytes.slice(lo, lo + limit).map((b) => decodeRaw(b) as LogEntry);
  }
}
