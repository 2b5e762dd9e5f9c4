/**
 * A bounded cache of decoded values read from committed state, keyed by store key.
 * The store drops every key a commit writes, and bumps `generation`; a read that
 * started before a commit finished never fills the cache, so it cannot hold a value
 * older than what is on disk.
 */
export class ReadCache {
  private readonly entries = new Map<string, unknown>();
  /** Bumped by every commit. */
  generation = 0;

  constructor(private readonly limit: number) {}

  has(key: string): boolean {
    return this.entries.has(key);
  }

  get(key: string): unknown {
    const value = this.entries.get(key);
    if (value !== undefined) {
      // Refresh recency: Map keeps insertion order, so the oldest is evicted first.
      this.entries.delete(key);
      this.entries.set(key, value);
    }
    return value;
  }

  /** Stores a value read when the generation was `readAt`; ignored if a commit came in between. */
  fill(key: string, value: unknown, readAt: number): void {
    if (readAt !== this.generation || value === undefined) return;
    if (this.entries.size >= this.limit) this.entries.delete(this.entries.keys().next().value as string);
    // Shared by every reader from now on: frozen, so a caller mutating it fails loudly.
    this.entries.set(key, deepFreeze(value));
  }

  invalidate(keys: Iterable<string>): void {
    this.generation++;
    for (const k of keys) this.entries.delete(k);
  }

  get size(): number {
    return this.entries.size;
  }
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
