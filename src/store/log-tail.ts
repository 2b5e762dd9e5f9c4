import type { LogEntry } from './store.js';

/**
 * The most recent change-log entries, in memory, for secondaries that are nearly current:
 * every entry from `start` on is here (older ones are read from disk). Trimmed in steps of
 * a quarter, not on every commit: dropping from the front copies the rest.
 */
export class LogTail {
  private entries: LogEntry[] = [];
  /** Every entry with an index at or above this is held. */
  private start = 1;

  constructor(private readonly limit: number) {}

  /** Forget everything: entries from `start` on will be remembered again. */
  reset(start: number): void {
    this.entries = [];
    this.start = start;
  }

  remember(entries: readonly LogEntry[]): void {
    for (const e of entries) this.entries.push(e);
    if (this.entries.length > this.limit + this.limit / 4) {
      const dropped = this.entries.splice(0, this.entries.length - this.limit);
      this.start = (dropped[dropped.length - 1] as LogEntry).Index + 1;
    }
  }

  /** Entries after `index`, up to `limit`, when the tail holds them (undefined: read from disk). */
  after(index: number, limit: number): LogEntry[] | undefined {
    if (index + 1 < this.start) return undefined;
    const tail = this.entries;
    let lo = 0;
    let hi = tail.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((tail[mid] as LogEntry).Index <= index) lo = mid + 1;
      else hi = mid;
    }
    return tail.slice(lo, lo + limit);
  }
}
