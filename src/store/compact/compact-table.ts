import { type IndexDef, type TableDef, indexedFields } from '../schema.js';
import { fieldNames } from '../../domain/records.js';
import { type CompactLoader, type RecordList, type Table, byID } from '../table.js';
import { RecordArena } from './arena.js';
import { type DumpPart, DumpReader, DumpWriter, type TableDumpMeta } from './dump.js';
import { IdTable } from './id-table.js';
import { ValueMemo, readFields, stringAt } from './msgpack-fields.js';
import { Positional } from './positional.js';
import { Recent } from './recent.js';
import { SlotSet } from './slot-set.js';
import { TimeOrder } from './time-order.js';

/**
 * A table of records kept as their encoded bytes (a RecordArena) and found through indexes
 * that hold slot numbers, not records: by ID and by each unique key in IdTables (typed
 * arrays), by each non-unique key in sets of small integers, and by time in buckets of them.
 * A million tokens are a few dozen buffers and typed arrays, so neither the garbage
 * collector's work nor V8's heap limit grows with the token count.
 *
 * A record asked for is decoded, and the most recently used are kept decoded: the same object
 * for the same version while it stays hot, so caches keyed by the record (the serialised views
 * of tokens) keep working for the tokens in use.
 */
export interface CompactCodec<R> {
  encode(record: R): Uint8Array;
  /** Checks a record rebuilt from the positional form whole: throws when it is not well formed. */
  check(value: unknown): R;
  /**
   * The top-level field of the encoded map that holds the ID (read without decoding). The
   * others come from the table's declaration: every field a record has, for the positional form
   * the table keeps (the field names are not kept with each record), and those its indexes read.
   */
  idField: string;
  /** Decodes one value of the map (a list of links), for a load. */
  decodeValue(bytes: Uint8Array): unknown;
  /** Records kept decoded, about (the recently used ones). */
  cacheSize: number;
  /** The index key whose members do not enter the change log (a token's `local`): what `globalRecords` leaves out. */
  notGlobal?: readonly [index: string, key: string];
}

interface Multi {
  name: string;
  keys: IndexDef<unknown>['keys'];
  map: Map<string, SlotSet>;
  /** Members under a key in ID order, made on first use and dropped on change. */
  sorted: Map<string, Uint32Array>;
}

function fieldIndex(indexFields: readonly string[], field: string | undefined): number {
  const i = field === undefined ? -1 : indexFields.indexOf(field);
  if (i === -1) throw new Error(`${field ?? 'a unique index'} must be one of the indexed fields`);
  return i;
}

/** Bytes of replaced and deleted records the arena may hold before it is compacted (and at least its live bytes). */
const GARBAGE_FLOOR = 64 * 1024 * 1024;

export class CompactTable<R, I extends string> implements Table<R, I>, CompactLoader {
  private readonly arena = new RecordArena();
  private readonly ids = new IdTable();
  private readonly unique: Array<{ name: string; keys: IndexDef<R>['keys']; table: IdTable; field: number }> = [];
  private readonly multi: Multi[] = [];
  private readonly decoded: Recent<R>;
  private readonly positional: Positional;
  private readonly indexAt: Int32Array;
  /** Where each field's value starts in a positional record (a bulk delete's scratch). */
  private readonly fieldStarts: Int32Array;
  /** Which of `indexFields` is the ID, and which a load reads straight into an IdTable (the ID and unique keys). */
  private readonly idAt: number;
  private readonly fromBytes: boolean[];
  /** Where each of `indexFields` is among `fields`. */
  private readonly inFields: Int32Array;
  /** A load's non-unique keys, computed before anything is stored: index, key, index, key... */
  private readonly loadKeys: Array<Multi | string> = [];
  /** The values a load decoded, by their bytes (forgotten when the load ends). */
  private readonly memo = new ValueMemo();
  /** The index whose keys `emitKey` adds to `loadKeys` (one function for every record). */
  private emitting: Multi | undefined;
  private readonly emitKey = (k: string) => {
    this.loadKeys.push(this.emitting as Multi, k);
  };
  /** The ID table and the unique ones, and which of `indexFields` each is keyed by (a load sets them from the bytes). */
  private readonly idTables: IdTable[];
  private readonly idFields: number[];
  /** The ordered (expiry) index. */
  private readonly order = new TimeOrder();

  /** Every field of a record, in the positional form's order (the ID first): the table's declaration. */
  readonly fields: readonly string[];
  /** Every field the ID, the indexes and the time order read: all a load reads of a record. */
  private readonly indexFields: readonly string[];

  constructor(
    readonly def: TableDef<R, I>,
    private readonly codec: CompactCodec<R>,
  ) {
    this.fields = fieldNames(def.fields);
    this.indexFields = indexedFields(def, codec.idField);
    for (const [name, idx] of Object.entries(def.indexes) as Array<[string, IndexDef<R>]>) {
      if (idx.unique) {
        // A unique key is read from the bytes straight into its table: the key must be one field's value.
        if (idx.reads.length !== 1) throw new Error(`${def.name}: unique index ${name} must read one field, its key`);
        this.unique.push({ name, keys: idx.keys, table: new IdTable(), field: fieldIndex(this.indexFields, idx.reads[0]) });
      } else this.multi.push({ name, keys: idx.keys as IndexDef<unknown>['keys'], map: new Map(), sorted: new Map() });
    }
    this.decoded = new Recent(Math.max(1, codec.cacheSize >> 1));
    if (this.fields[0] !== codec.idField) throw new Error(`the first of the fields must be the ID, ${codec.idField}`);
    this.positional = new Positional(this.fields);
    this.indexAt = new Int32Array(this.indexFields.length);
    this.fieldStarts = new Int32Array(this.fields.length);
    this.idAt = fieldIndex(this.indexFields, codec.idField);
    this.inFields = Int32Array.from(this.indexFields, (f) => this.fields.indexOf(f));
    this.fromBytes = this.indexFields.map((_, i) => i === this.idAt || this.unique.some((u) => u.field === i));
    this.idTables = [this.ids, ...this.unique.map((u) => u.table)];
    this.idFields = [this.idAt, ...this.unique.map((u) => u.field)];
  }

  get size(): number {
    return this.arena.size;
  }

  /** Room in the ID tables for `records` while the table is empty (a load about to add about as many). */
  reserve(records: number): void {
    for (const t of this.idTables) t.reserve(records);
  }

  /** Bytes of buffers and typed arrays held (records, slots, indexes), not counting decoded records. */
  get bytes(): number {
    let b = this.arena.bytes + this.ids.bytes;
    for (const u of this.unique) b += u.table.bytes;
    for (const m of this.multi) for (const set of m.map.values()) b += set.bytes;
    return b;
  }

  get(id: string): R | undefined {
    const slot = this.ids.get(id);
    return slot === undefined ? undefined : this.record(slot);
  }

  has(id: string): boolean {
    return this.ids.get(id) !== undefined;
  }

  peek(id: string): R | undefined {
    const slot = this.ids.get(id);
    return slot === undefined ? undefined : this.peekSlot(slot);
  }

  /** A record decoded for a moment: the cached one when there is one, else decoded and not kept. */
  private peekSlot(slot: number): R {
    return this.decoded.get(slot) ?? this.decode(this.arena.get(slot));
  }

  uniqueID(index: I, key: string): string | undefined {
    const slot = this.uniqueTable(index).get(key);
    return slot === undefined ? undefined : this.idOf(slot);
  }

  byUnique(index: I, key: string): R | undefined {
    const slot = this.uniqueTable(index).get(key);
    return slot === undefined ? undefined : this.record(slot);
  }

  *members(index: I, key: string): IterableIterator<R> {
    const set = this.multiIndex(index).map.get(key);
    if (set !== undefined) for (const slot of set.toArray()) yield this.record(slot);
  }

  memberCount(index: I, key: string): number {
    return this.multiIndex(index).map.get(key)?.size ?? 0;
  }

  isMember(index: I, key: string, id: string): boolean {
    const slot = this.ids.get(id);
    return slot !== undefined && (this.multiIndex(index).map.get(key)?.has(slot) ?? false);
  }

  /** The slots under `key` in ID order, kept until one of them changes. */
  private sortedSlots(index: I, key: string): Uint32Array | undefined {
    const m = this.multiIndex(index);
    let list = m.sorted.get(key);
    if (list === undefined) {
      const set = m.map.get(key);
      if (set === undefined) return undefined;
      const slots = set.toArray();
      const ids = Array.from(slots, (slot) => this.idOf(slot));
      const order = Array.from(slots.keys()).sort((a, b) => byID(ids[a] as string, ids[b] as string));
      list = Uint32Array.from(order, (i) => slots[i] as number);
      m.sorted.set(key, list);
    }
    return list;
  }

  *sortedMembers(index: I, key: string): IterableIterator<R> {
    for (const slot of this.sortedSlots(index, key) ?? []) if (this.arena.has(slot)) yield this.record(slot);
  }

  *sortedMembersAfter(index: I, key: string, after: string | undefined): IterableIterator<R> {
    const list = this.sortedSlots(index, key);
    if (list === undefined) return;
    let lo = 0;
    let hi = list.length;
    if (after !== undefined)
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (this.idOf(list[mid] as number) <= after) lo = mid + 1;
        else hi = mid;
      }
    // A walk of many (who can): decoded for a moment, not kept (the tokens in use stay cached).
    for (let i = lo; i < list.length; i++) {
      const slot = list[i] as number;
      if (this.arena.has(slot)) yield this.peekSlot(slot);
    }
  }

  memberIDs(index: I, key: string): string[] {
    const set = this.multiIndex(index).map.get(key);
    return set === undefined ? [] : Array.from(set.toArray(), (slot) => this.idOf(slot));
  }

  indexKeys(index: I): IterableIterator<string> {
    return this.multiIndex(index).map.keys();
  }

  *values(): IterableIterator<R> {
    for (const slot of [...this.arena.slots()]) if (this.arena.has(slot)) yield this.decoded.get(slot) ?? this.decode(this.arena.get(slot));
  }

  globalRecords(): RecordList<R> {
    const [index, key] = this.codec.notGlobal ?? ['', ''];
    const skip = this.codec.notGlobal ? this.multiIndex(index).map.get(key) : undefined;
    const slots = new Uint32Array(this.ids.size);
    let n = 0;
    // In slot order: another table's hash order would be a bad order to insert in (IdTable's hashWords).
    for (const slot of this.arena.slots()) if (!skip?.has(slot)) slots[n++] = slot;
    const captured = this.arena.capture(slots.subarray(0, n));
    return {
      length: n,
      slice: (start, end) => {
        const out: R[] = [];
        for (let i = Math.max(0, start); i < Math.min(end, n); i++) out.push(this.decode(captured.get(i)));
        return out;
      },
    };
  }

  put(record: R, options?: { bytes?: Uint8Array; loading?: boolean }): R | undefined {
    return this.store(record, options?.bytes ?? this.codec.encode(record), options?.loading === true);
  }

  /** This table's ways in at a start besides `loadStored`: a checkpoint, a scan on a second thread. */
  get compact(): CompactLoader {
    return this;
  }

  /**
   * A record as stored on disk, at start: only the fields it is indexed by are read from its
   * bytes, which are kept in the positional form (the whole record is checked when it is first
   * decoded). False when it is not a map of declared fields, or those fields are not as the
   * indexes expect (a corrupt record: the start fails, naming it).
   */
  loadStored(bytes: Uint8Array): boolean {
    const at = this.indexAt;
    // One pass over the map finds every field for the positional form; the indexed ones are read from it.
    const kept = this.positional.fromMap(bytes);
    if (kept === undefined) return false;
    const starts = this.positional.starts;
    for (let i = 0; i < at.length; i++) at[i] = starts[this.inFields[i] as number] as number;
    return this.loadRead(bytes, kept);
  }

  /** The positional fields whose value starts `loadPositional` is given, in its order. */
  get loadFieldPositions(): Int32Array {
    return this.inFields;
  }

  /** Takes `buffer` (records in the positional form, packed) as a chunk of the table's own: its number, for `loadPositional`. */
  adoptChunk(buffer: Buffer): number {
    return this.arena.adopt(buffer);
  }

  /**
   * `loadEncoded` of a record already in the positional form (a scan on another thread made
   * it), at `offset` of adopted chunk `chunk`, `length` bytes: `starts[from + i]` is where the
   * value of field `loadFieldPositions[i]` starts in it (-1: absent). False when the record is
   * not as the indexes expect.
   */
  loadPositional(chunk: number, offset: number, length: number, starts: Int32Array, from: number): boolean {
    const at = this.indexAt;
    for (let i = 0; i < at.length; i++) at[i] = starts[from + i] as number;
    const bytes = this.arena.chunk(chunk).subarray(offset, offset + length);
    return this.loadRead(bytes, bytes, chunk, offset);
  }

  /** The indexed fields read from `source` at `indexAt`, then `kept` loaded under them (already at `offset` of `chunk`, unless -1). */
  private loadRead(source: Uint8Array, kept: Uint8Array, chunk = -1, offset = 0): boolean {
    const fields = readFields(source, this.indexFields, this.indexAt, this.codec.decodeValue, this.fromBytes, this.memo);
    return fields !== undefined && this.loadFields(source, kept, fields as R, chunk, offset);
  }

  /**
   * Stores `kept` (the bytes the arena holds; already at `offset` of adopted chunk `chunk`, unless
   * that is -1) under the indexed `fields`, whose values `indexAt` places in `source`.
   */
  private loadFields(source: Uint8Array, kept: Uint8Array, fields: R, chunk = -1, offset = 0): boolean {
    const at = this.indexAt;
    if (at[this.idAt] === -1) return false;
    // Keys computed before anything is stored: a field of the wrong shape leaves nothing behind.
    const keys = this.loadKeys;
    keys.length = 0;
    let time: number | undefined;
    try {
      for (const m of this.multi) {
        this.emitting = m;
        m.keys(fields, this.emitKey);
      }
      time = this.def.orderedBy?.time(fields);
      if (time !== undefined && !Number.isFinite(time)) return false;
    } catch {
      return false;
    }
    const slot = chunk === -1 ? this.arena.add(kept) : this.arena.addAt(chunk, offset, kept.length);
    // The ID and unique keys go from the bytes to their tables (no string made of a UUID).
    const { idTables, idFields } = this;
    for (let t = 0; t < idTables.length; t++) {
      const pos = at[idFields[t] as number] as number;
      if (pos === -1 || (idTables[t] as IdTable).setAt(source, pos, slot)) continue;
      // Not a string after all: what was set is undone (each key found again by its string).
      for (let d = 0; d < t; d++) {
        const p = at[idFields[d] as number] as number;
        const key = p === -1 ? undefined : stringAt(source, p);
        if (key !== undefined && idTables[d]?.get(key) === slot) idTables[d]?.delete(key);
      }
      this.arena.delete(slot);
      return false;
    }
    for (let i = 0; i < keys.length; i += 2) {
      const m = keys[i] as Multi;
      const k = keys[i + 1] as string;
      let set = m.map.get(k);
      if (!set) m.map.set(k, (set = new SlotSet()));
      set.add(slot);
    }
    if (time !== undefined) this.order.add(time, slot, true);
    return true;
  }

  delete(id: string, known?: R): R | undefined {
    const slot = this.ids.get(id);
    if (slot === undefined) return undefined;
    const old = known ?? this.peekSlot(slot);
    this.unindex(old, slot);
    this.ids.delete(id);
    this.arena.delete(slot);
    this.decoded.delete(slot);
    return old;
  }

  /**
   * Deletes by ID without decoding the record (the reaper's bulk deletes, a follower's deletes):
   * its index keys come from the fields the indexes read, taken from its bytes as a load takes
   * them. Answers those fields (the ID, the keys, the expiry), undefined when none is held.
   */
  deleteUnread(id: string): Partial<R> | undefined {
    const slot = this.ids.get(id);
    if (slot === undefined) return undefined;
    const fields = this.decoded.get(slot) ?? this.indexedFieldsOf(slot);
    this.unindex(fields, slot);
    this.ids.deleteIf(id, slot);
    this.arena.delete(slot);
    this.decoded.delete(slot);
    return fields;
  }

  /** The fields of the record in `slot` its indexes read, from its bytes (the record decoded whole only if they are not positional). */
  private indexedFieldsOf(slot: number): R {
    const bytes = this.arena.get(slot);
    const starts = this.fieldStarts;
    if (!this.positional.startsIn(bytes, starts)) return this.decode(bytes);
    const at = this.indexAt;
    for (let i = 0; i < at.length; i++) at[i] = starts[this.inFields[i] as number] as number;
    return (readFields(bytes, this.indexFields, at, this.codec.decodeValue, undefined, this.memo) as R | undefined) ?? this.decode(bytes);
  }

  /**
   * The table as a checkpoint keeps it (dump.ts): the arena's records packed, the ID tables'
   * arrays as they are, and each index's members. The table must not change until the parts are written.
   */
  dump(): { meta: TableDumpMeta; parts: DumpPart[] } {
    const w = new DumpWriter();
    const arena = this.arena.dump();
    const records = arena.records();
    const times = w.sets(this.order.atTime);
    const meta: TableDumpMeta = {
      arena: {
        top: arena.top,
        chunkOf: w.add(arena.chunkOf),
        offsetOf: w.add(arena.offsetOf),
        lengthOf: w.add(arena.lengthOf),
        chunks: arena.chunks.map(({ size, fill }) => ({ part: w.stream(fill, size, records), fill })),
      },
      ids: w.idTable(this.ids),
      unique: this.unique.map((u) => ({ name: u.name, ...w.idTable(u.table) })),
      multi: this.multi.map((m) => ({ name: m.name, ...w.sets(m.map) })),
      times: { ...times, keys: w.add(Float64Array.from(times.keys)) },
    };
    return { meta, parts: w.parts };
  }

  /** Takes a dump read back into this new, empty table; throws when it does not fit together. */
  restore(meta: TableDumpMeta, parts: readonly Buffer[]): void {
    if (this.size !== 0) throw new Error('a table is restored only when empty');
    const r = new DumpReader(parts);
    const a = meta.arena;
    this.arena.restore({
      top: a.top,
      chunkOf: r.u32(a.chunkOf),
      offsetOf: r.u32(a.offsetOf),
      lengthOf: r.u32(a.lengthOf),
      chunks: a.chunks.map((c) => r.part(c.part)),
      fills: a.chunks.map((c) => c.fill),
    });
    r.idTable(this.ids, meta.ids);
    if (this.ids.size !== this.arena.size) throw new RangeError(`${this.ids.size} IDs for ${this.arena.size} records`);
    const has = (slot: number) => this.arena.has(slot);
    for (const u of this.unique) {
      const d = meta.unique.find((x) => x.name === u.name);
      if (d === undefined) throw new RangeError(`no unique index ${u.name}`);
      r.idTable(u.table, d);
    }
    for (const m of this.multi) {
      const d = meta.multi.find((x) => x.name === m.name);
      if (d === undefined) throw new RangeError(`no index ${m.name}`);
      r.sets(d, m.map, has);
    }
    r.sets({ ...meta.times, keys: Array.from(r.f64(meta.times.keys)) }, this.order.atTime, has);
    this.order.finishLoading();
  }

  finishLoading(): void {
    this.order.finishLoading();
    this.memo.clear();
  }

  orderedUpTo(until: number, limit: number, after?: [number, string]): Array<[number, string]> {
    const out: Array<[number, string]> = [];
    for (const [time, at] of this.order.upTo(until, after?.[0])) {
      if (out.length >= limit) break;
      const ids = Array.from(at.toArray(), (slot) => this.idOf(slot)).sort(byID);
      for (const id of ids) {
        if (out.length >= limit) break;
        if (after && time === after[0] && id <= after[1]) continue;
        out.push([time, id]);
      }
    }
    return out;
  }

  firstOrdered(): number | undefined {
    return this.order.first();
  }

  /** Adds or replaces a record whose encoded form is `bytes`. */
  private store(record: R, bytes: Uint8Array, loading: boolean): R | undefined {
    const id = this.def.id(record);
    const slot = loading ? undefined : this.ids.get(id);
    let old: R | undefined;
    let at: number;
    const kept = this.positional.fromMap(bytes);
    // Records are checked against their declaration before they are written: one that is not a map
    // of declared fields is a fault here, never kept in another form.
    if (kept === undefined) throw new Error(`${this.def.name}: record ${id} has a field its declaration does not list`);
    if (slot === undefined) {
      at = this.arena.add(kept);
      this.ids.set(id, at);
    } else {
      at = slot;
      old = this.record(slot);
      this.unindex(old, slot);
      this.arena.replace(slot, kept);
    }
    this.index(record, at, loading);
    // Not kept decoded until it is read: a burst of creates would otherwise fill the cache with
    // records nobody reads, each copied by scavenges and promoted before it is dropped.
    this.decoded.delete(at);
    if (this.arena.garbageBytes > Math.max(GARBAGE_FLOOR, this.arena.usedBytes)) this.arena.compact();
    return old;
  }

  private uniqueTable(index: string): IdTable {
    const u = this.unique.find((x) => x.name === index);
    if (u === undefined) throw new Error(`${this.def.name} has no unique index ${index}`);
    return u.table;
  }

  private multiIndex(index: string): Multi {
    const m = this.multi.find((x) => x.name === index);
    if (m === undefined) throw new Error(`${this.def.name} has no index ${index}`);
    return m;
  }

  /**
   * Walks the table and throws, naming what is wrong, unless every invariant holds (TigerBeetle's
   * `verify()`): each structure's own (arena, ID tables, every index's slot sets); every live
   * record decodes and is found under its ID, under each of its unique keys and in each of its
   * index keys, and at its time; no index holds a slot or key no record accounts for; the time
   * order is sorted; a record kept decoded equals its bytes. Model-based tests call it after every step.
   */
  verify(): void {
    this.arena.verify();
    for (const t of this.idTables) t.verify();
    if (this.ids.size !== this.arena.size) throw new Error(`${this.def.name}: ${this.ids.size} IDs for ${this.arena.size} records`);
    const memberships = new Map<Multi, number>(this.multi.map((m) => [m, 0]));
    const uniques = new Map(this.unique.map((u) => [u, 0]));
    let timed = 0;
    for (const slot of this.arena.slots()) {
      const record = this.decode(this.arena.get(slot));
      const id = this.def.id(record);
      if (this.ids.get(id) !== slot) throw new Error(`${this.def.name}: record ${id} in slot ${slot} is not found under its ID`);
      if (this.idOf(slot) !== id) throw new Error(`${this.def.name}: slot ${slot}'s ID read from its bytes is not ${id}`);
      const kept = this.decoded.get(slot);
      if (kept !== undefined && JSON.stringify(kept) !== JSON.stringify(record))
        throw new Error(`${this.def.name}: record ${id} kept decoded differs from its bytes`);
      for (const u of this.unique)
        u.keys(record, (k) => {
          if (u.table.get(k) !== slot) throw new Error(`${this.def.name}: record ${id} is not found under its ${u.name} key`);
          uniques.set(u, (uniques.get(u) ?? 0) + 1);
        });
      for (const m of this.multi)
        m.keys(record, (k) => {
          if (!m.map.get(k)?.has(slot)) throw new Error(`${this.def.name}: record ${id} is missing from index ${m.name} under ${k}`);
          memberships.set(m, (memberships.get(m) ?? 0) + 1);
        });
      const time = this.def.orderedBy?.time(record);
      if (time !== undefined) {
        if (!this.order.has(time, slot)) throw new Error(`${this.def.name}: record ${id} is missing from the time order`);
        timed++;
      }
    }
    for (const u of this.unique)
      if (u.table.size !== uniques.get(u)) throw new Error(`${this.def.name}: index ${u.name} holds keys no record has`);
    for (const m of this.multi) {
      let held = 0;
      for (const [k, set] of m.map) {
        set.verify();
        if (set.size === 0) throw new Error(`${this.def.name}: index ${m.name} keeps an empty set under ${k}`);
        held += set.size;
      }
      if (held !== memberships.get(m)) throw new Error(`${this.def.name}: index ${m.name} holds slots no record accounts for`);
    }
    this.order.verify(this.def.name, timed);
  }

  /** The ID of the record in `slot`, read from its bytes (nothing decoded). */
  private idOf(slot: number): string {
    const cached = this.decoded.get(slot);
    if (cached !== undefined) return this.def.id(cached);
    const bytes = this.arena.get(slot);
    return stringAt(bytes, 3) ?? this.def.id(this.decode(bytes));
  }

  /** The record of bytes the arena holds: positional, or a map kept as stored. */
  private decode(bytes: Uint8Array): R {
    return this.codec.check(this.positional.toRecord(this.codec.decodeValue(bytes) as unknown[]));
  }

  private record(slot: number): R {
    const cached = this.decoded.use(slot);
    if (cached !== undefined) return cached;
    const record = this.decode(this.arena.get(slot));
    this.remember(slot, record);
    return record;
  }

  private remember(slot: number, record: R): void {
    this.decoded.set(slot, record);
  }

  private index(record: R, slot: number, loading: boolean): void {
    for (const u of this.unique) u.keys(record, (k) => u.table.set(k, slot));
    for (const m of this.multi) {
      m.keys(record, (k) => {
        let set = m.map.get(k);
        if (!set) m.map.set(k, (set = new SlotSet()));
        set.add(slot);
        if (!loading) m.sorted.delete(k);
      });
    }
    const time = this.def.orderedBy?.time(record);
    if (time !== undefined) this.order.add(time, slot, loading);
  }

  private unindex(record: R, slot: number): void {
    // A unique key may already belong to another record (taken over in the same batch).
    for (const u of this.unique) u.keys(record, (k) => u.table.deleteIf(k, slot));
    for (const m of this.multi) {
      m.keys(record, (k) => {
        const set = m.map.get(k);
        if (!set) return;
        set.delete(slot);
        m.sorted.delete(k);
        if (set.size === 0) m.map.delete(k);
      });
    }
    const time = this.def.orderedBy?.time(record);
    if (time !== undefined) this.order.delete(time, slot);
  }
}
