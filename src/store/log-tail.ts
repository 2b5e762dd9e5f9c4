import { decodeRaw } from './records.js';
import type { LogEntry } from './store.js';

/** Bytes of one of the tail's buffers; an entry over a quarter of it gets a buffer of its own. */
const CHUNK = 1 << 20;

/**
 * The most recent change-log entries, in memory, for secondaries that are nearly current:
 * every entry from `start` on is here (older ones are read from disk). Each is kept as the
 * bytes written to disk and decoded when read, as from disk: a held entry object (with the
 * records it changed) is work for every scavenge while it is held. Trimmed in steps of a
 * quarter, not on every commit: dropping from the front copies the rest.
 *
 * The bytes are copied into buffers of the tail's own, one after another: an entry encoded
 * into a small Buffer is a slice of node's shared 8 KiB pool, and holding it held the whole
 * slab with whatever else was cut from it (twice the entries' own bytes under a churn of
 * logins). A buffer goes once the trim has dropped every entry in it.
 */
export class LogTail {
  private indexes: number[] = [];
  private bytes: Uint8Array[] = [];
  /** Every entry with an index at or above this is held. */
  private start = 1;
  private chunk = new Uint8Array(0);
  private fill = 0;

  constructor(private readonly limit: number) {}

  /** Forget everything: entries from `start` on will be remembered again. */
  reset(start: number): void {
    this.indexes = [];
    this.bytes = [];
    this.start = start;
    this.chunk = new Uint8Array(0);
    this.fill = 0;
  }

  /** The entry at `index`, as written to disk. */
  remember(index: number, bytes: Uint8Array): void {
    this.indexes.push(index);
    this.bytes.push(this.copy(bytes));
    if (this.indexes.length > this.limit + this.limit / 4) {
      const drop = this.indexes.length - this.limit;
      this.start = (this.indexes[drop - 1] as number) + 1;
      this.indexes.splice(0, drop);
      this.bytes.splice(0, drop);
    }
  }

  /** `bytes` in the current buffer (a new one when they do not fit), as a view the tail holds. */
  private copy(bytes: Uint8Array): Uint8Array {
    const n = bytes.byteLength;
    if (n > CHUNK / 4) return new Uint8Array(bytes);
    if (this.fill + n > this.chunk.byteLength) {
      this.chunk = new Uint8Array(CHUNK);
      this.fill = 0;
    }
    const view = this.chunk.subarray(this.fill, this.fill + n);
    view.set(bytes);
    this.fill += n;
    return view;
  }

  /** Bytes the tail's entries hold, buffers whole (what it keeps in memory, about). */
  get heldBytes(): number {
    const buffers = new Set<ArrayBufferLike>();
    let n = 0;
    for (const b of this.bytes)
      if (!buffers.has(b.buffer)) {
        buffers.add(b.buffer);
        n += b.buffer.byteLength;
      }
    return n;
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
