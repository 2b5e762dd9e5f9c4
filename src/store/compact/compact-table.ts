import { RecordArena } from './arena.js';
import { IdTable } from './id-table.js';
import { fieldOffsets, stringAt } from './scan.js';

/**
 * A table of records kept as their encoded bytes (RecordArena) and found through IdTables: by
 * ID, and by each unique key (a token's SecretID). A record asked for is decoded, and the
 * most recently used ones are kept decoded (the same object for the same version, so caches
 * keyed by the record, such as serialised views, keep working for the hot ones). Loading a
 * data dir reads only the ID and unique-key fields of each record's bytes.
 */
export interface CompactTableOptions<R> {
  /** The record's ID, and the field it is read from in the bytes at load. */
  id: { of: (record: R) => string; field: string };
  /** Unique keys: each a name, the key of a record (undefined: none), and the field holding it in the bytes. */
  unique: ReadonlyArray<{ name: string; of: (record: R) => string | undefined; field: string }>;
  encode(record: R): Uint8Array;
  decode(bytes: Uint8Array): R;
  /** Records kept decoded (least recently used dropped first). */
  cacheSize: number;
}

export class CompactTable<R> {
  private readonly arena = new RecordArena();
  private readonly ids = new IdTable();
  private readonly uniques: Map<string, IdTable>;
  private readonly decoded = new Map<number, R>();
  private readonly fieldNames: Uint8Array[];
  private readonly at: Int32Array;

  constructor(private readonly options: CompactTableOptions<R>) {
    this.uniques = new Map(options.unique.map((u) => [u.name, new IdTable()]));
    this.fieldNames = [options.id.field, ...options.unique.map((u) => u.field)].map((f) => Buffer.from(f));
    this.at = new Int32Array(this.fieldNames.length);
  }

  get size(): number {
    return this.arena.size;
  }

  /** Bytes of buffers and typed arrays held (records, slots, ID tables), not counting decoded records. */
  get bytes(): number {
    let b = this.arena.bytes + this.ids.bytes;
    for (const u of this.uniques.values()) b += u.bytes;
    return b;
  }

  get(id: string): R | undefined {
    const slot = this.ids.get(id);
    return slot === undefined ? undefined : this.record(slot);
  }

  has(id: string): boolean {
    return this.ids.has(id);
  }

  /** The record a unique index maps `key` to. */
  byUnique(index: string, key: string): R | undefined {
    const slot = this.unique(index).get(key);
    return slot === undefined ? undefined : this.record(slot);
  }

  /** The ID of the record a unique index maps `key` to (read from its bytes: nothing decoded). */
  uniqueID(index: string, key: string): string | undefined {
    const slot = this.unique(index).get(key);
    if (slot === undefined) return undefined;
    const bytes = this.arena.get(slot);
    fieldOffsets(bytes, this.fieldNames, this.at);
    return stringAt(bytes, this.at[0] as number);
  }

  /** Adds or replaces a record (by its ID); answers the version it replaced. */
  put(record: R): R | undefined {
    const id = this.options.id.of(record);
    const bytes = this.options.encode(record);
    const slot = this.ids.get(id);
    let old: R | undefined;
    if (slot === undefined) {
      const added = this.arena.add(bytes);
      this.ids.set(id, added);
      this.index(record, added);
      this.remember(added, record);
    } else {
      old = this.record(slot);
      this.unindex(old, slot);
      this.arena.replace(slot, bytes);
      this.index(record, slot);
      this.remember(slot, record);
    }
    return old;
  }

  /** Removes a record; answers it. */
  delete(id: string): R | undefined {
    const slot = this.ids.get(id);
    if (slot === undefined) return undefined;
    const old = this.record(slot);
    this.unindex(old, slot);
    this.ids.delete(id);
    this.arena.delete(slot);
    this.decoded.delete(slot);
    return old;
  }

  /**
   * A record as stored on disk, at load: its bytes are kept as they are, and only its ID and
   * unique keys are read from them. False when they are not there (the caller reports the
   * record as corrupt).
   */
  load(bytes: Uint8Array): boolean {
    if (!fieldOffsets(bytes, this.fieldNames, this.at)) return false;
    const id = this.at[0] === -1 ? undefined : stringAt(bytes, this.at[0] as number);
    if (id === undefined) return false;
    const keys: Array<string | undefined> = [];
    for (let u = 0; u < this.options.unique.length; u++) {
      const at = this.at[u + 1] as number;
      keys.push(at === -1 ? undefined : stringAt(bytes, at));
    }
    const existing = this.ids.get(id);
    if (existing !== undefined) this.delete(id);
    const slot = this.arena.add(bytes);
    this.ids.set(id, slot);
    this.options.unique.forEach((u, i) => {
      const k = keys[i];
      if (k !== undefined) (this.uniques.get(u.name) as IdTable).set(k, slot);
    });
    return true;
  }

  /** Every record, decoded one at a time (not kept). */
  *values(): IterableIterator<R> {
    for (const slot of this.ids.values()) yield this.decoded.get(slot) ?? this.options.decode(this.arena.get(slot));
  }

  private unique(index: string): IdTable {
    const table = this.uniques.get(index);
    if (table === undefined) throw new Error(`no unique index ${index}`);
    return table;
  }

  private record(slot: number): R {
    const cached = this.decoded.get(slot);
    if (cached !== undefined) {
      // Most recently used last: Map keeps insertion order.
      this.decoded.delete(slot);
      this.decoded.set(slot, cached);
      return cached;
    }
    const record = this.options.decode(this.arena.get(slot));
    this.remember(slot, record);
    return record;
  }

  private remember(slot: number, record: R): void {
    this.decoded.delete(slot);
    this.decoded.set(slot, record);
    if (this.decoded.size > this.options.cacheSize) {
      const oldest = this.decoded.keys().next().value as number;
      this.decoded.delete(oldest);
    }
  }

  private index(record: R, slot: number): void {
    for (const u of this.options.unique) {
      const k = u.of(record);
      if (k !== undefined) (this.uniques.get(u.name) as IdTable).set(k, slot);
    }
  }

  private unindex(record: R, slot: number): void {
    for (const u of this.options.unique) {
      const k = u.of(record);
      const table = this.uniques.get(u.name) as IdTable;
      if (k !== undefined && table.get(k) === slot) table.delete(k);
    }
  }
}
