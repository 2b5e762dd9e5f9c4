/**
 * A cache of decoded values read from committed state, keyed by store key, bounded by
 * the bytes the values took on disk (a few large tokens cannot fill memory the way a
 * count bound would let them).
 * The store drops every key a commit writes, and bumps `generation`; a read that
 * started before a commit finished never fills the cache, so it cannot hold a value
 * older than what is on disk.
 */
export class ReadCache {
  private readonly entries = new Map<string, { value: unknown; bytes: number }>();
  private bytes = 0;
  /** Bumped by every commit. */
  generation = 0;

  constructor(
    /** Most encoded bytes held. */
    private readonly limitBytes: number,
  ) {}

  has(key: string): boolean {
    return this.entries.has(key);
  }

  get(key: string): unknown {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    // Refresh recency: Map keeps insertion order, so the oldest is evicted first.
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.value;
  }

  /**
   * Stores a value read when the generation was `readAt` (ignored if a commit came in
   * between), `bytes` being its encoded size; the least recently used go first.
   */
  fill(key: string, value: unknown, readAt: number, bytes: number): void {
    if (readAt !== this.generation || value === undefined || bytes > this.limitBytes / 8) return;
    this.drop(key);
    while (this.bytes + bytes > this.limitBytes && this.entries.size > 0) this.drop(this.entries.keys().next().value as string);
    // Shared by every reader from now on: frozen, so a caller mutating it fails loudly.
    this.entries.set(key, { value: deepFreeze(value), bytes });
    this.bytes += bytes;
  }

  private drop(key: string): void {
    const entry = this.entries.get(key);
    if (entry === undefined) return;
    this.entries.delete(key);
    this.bytes -= entry.bytes;
  }

  invalidate(keys: Iterable<string>): void {
    this.generation++;
    for (const k of keys) this.drop(k);
  }

  get size(): number {
    return this.entries.size;
  }

  /** Encoded bytes of the values held. */
  get sizeBytes(): number {
    return this.bytes;
  }
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
