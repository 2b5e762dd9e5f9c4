/**
 * The minimal key-value view the store's readers need. The committed LevelDB state
 * and a transaction's view (committed state plus its pending writes) both provide it,
 * so every query is written once.
 */
export interface KVView {
  get(key: string): Promise<Uint8Array | undefined>;
  getMany(keys: string[]): Promise<Array<Uint8Array | undefined>>;
  /** Keys in [gte, lt), ascending. */
  keys(range: { gte: string; lt: string; limit?: number }): AsyncIterable<string>;
}

/** Byte order of utf8 keys (LevelDB's order), with a fast path for the usual ASCII keys. */
export function compareKeys(a: string, b: string): number {
  // UTF-16 order equals UTF-8 byte order except around surrogates; fall back when present.
  if (/[\ud800-\udfff]/.test(a) || /[\ud800-\udfff]/.test(b)) return Buffer.compare(Buffer.from(a), Buffer.from(b));
  return a < b ? -1 : a > b ? 1 : 0;
}
