import type { TableDef } from '../schema.js';
import type { CompactLoader, RecordList, Table } from '../table.js';
import { IdOrder, compareSlotKeys } from './id-order.js';
import type { IdTable } from './id-table.js';
import { stringAt } from './msgpack-fields.js';
import { Recent } from './recent.js';
import { SlotSet } from './slot-set.js';
import { type CompactCodec, type Multi, TableLoader, TableParts, leaveKey } from './table-loader.js';
import { UnreadDelete } from './unread-delete.js';
export type { CompactCodec } from './table-loader.js';

/**
 * Bytes of replaced and deleted records the arena may hold before it is compacted (and at least its
 * live bytes, so a compaction's copy is paid for by as many bytes written): a quarter of one of its
 * 16 MiB chunks, so a small table under churn (a few thousand login tokens) stays in one chunk. It
 * held 64 MiB of garbage for an hour, then 16 MiB (a second chunk) for half of one, before this was
 * lowered from those.
 */
const GARBAGE_FLOOR = 4 * 1024 * 1024;
/**
 * Members of an index key up to which a walk in ID order sorts them (kept until one changes);
 * above it the walk filters the table's ID order by membership: a page of 1,000 then reads at
 * most 1,000 x (records / members) slots, never sorting a namespace's ten million.
 */
const SORT_AT_MOST = 16_384;
/** Slots of the ID order a walk reads at a time (it seeks again by key for the next). */
const WALK_BATCH = 256;

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
export class CompactTable<R, I extends string> implements Table<R, I> {
  private readonly parts: TableParts<R>;
  /** Every way in at a start (table-loader.ts). */
  private readonly loader: TableLoader<R>;
  private readonly unread: UnreadDelete<R>;
  private readonly arena: TableParts<R>['arena'];
  private readonly ids: IdTable;
  private readonly unique: TableParts<R>['unique'];
  private readonly multi: Multi[];
  /** The ordered (expiry) index. */
  private readonly order: TableParts<R>['order'];
  private readonly positional: TableParts<R>['positional'];
  private readonly decoded: Recent<R>;
  /** The slots in ID order, made on the first walk that needs it and kept as records come and go. */
  private idOrder: IdOrder | undefined;
  /** Every field of a record, in the positional form's order (the ID first): the table's declaration. */
  readonly fields: readonly string[];

  constructor(
    readonly def: TableDef<R, I>,
    private readonly codec: CompactCodec<R>,
  ) {
    const parts = new TableParts<R>(def as TableDef<R, string>, codec);
    this.parts = parts;
    this.loader = new TableLoader(parts);
    this.unread = new UnreadDelete(parts);
    ({
      arena: this.arena,
      ids: this.ids,
      unique: this.unique,
      multi: this.multi,
      order: this.order,
      positional: this.positional,
      fields: this.fields,
    } = parts);
    this.decoded = new Recent(Math.max(1, codec.cacheSize >> 1));
  }

  get size(): number {
    return this.arena.size;
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

  isMember(index: I, key: string, id: string): boolean | undefined {
    const slot = this.ids.get(id);
    return slot === undefined ? undefined : (this.multiIndex(index).map.get(key)?.has(slot) ?? false);
  }

  /** The slots under `key` in ID order, kept until one of them changes (a key of at most SORT_AT_MOST members). */
  private sortedSlots(m: Multi, key: string): Uint32Array | undefined {
    let list = m.sorted.get(key);
    if (list === undefined) {
      const set = m.map.get(key);
      if (set === undefined) return undefined;
      list = Uint32Array.from(Array.from(set.toArray()).sort((a, b) => compareSlotKeys(this.ids, a, b)));
      m.sorted.set(key, list);
    }
    return list;
  }

  /** The table's slots in ID order, made now if it is not kept yet. */
  private ordered(): IdOrder {
    this.idOrder ??= IdOrder.of(this.ids, this.arena.liveSlots());
    return this.idOrder;
  }

  *sortedMembers(index: I, key: string): IterableIterator<R> {
    const m = this.multiIndex(index);
    if ((m.map.get(key)?.size ?? 0) > SORT_AT_MOST) return yield* this.sortedMembersAfter(index, key, undefined);
    // A whole list of a few (a policy's tokens, asked again and again): kept decoded, as reads keep them.
    for (const slot of this.sortedSlots(m, key) ?? []) if (this.arena.has(slot)) yield this.record(slot);
  }

  *sortedMembersAfter(index: I, key: string, after: string | undefined): IterableIterator<R> {
    const m = this.multiIndex(index);
    const size = m.map.get(key)?.size ?? 0;
    if (size === 0) return;
    // A walk of many (who can, a list): decoded for a moment, not kept (the tokens in use stay cached).
    if (size <= SORT_AT_MOST) {
      const list = this.sortedSlots(m, key) as Uint32Array;
      let lo = 0;
      let hi = list.length;
      if (after !== undefined)
        while (lo < hi) {
          const mid = (lo + hi) >>> 1;
          if (this.idOf(list[mid] as number) <= after) lo = mid + 1;
          else hi = mid;
        }
      for (let i = lo; i < list.length; i++) {
        const slot = list[i] as number;
        if (this.arena.has(slot)) yield this.peekSlot(slot);
      }
      return;
    }
    // Many: the ID order filtered by membership, a batch at a time, each found again by the key
    // it ended at (the table may change between batches); the members read before any is given.
    const batch: number[] = [];
    const found: R[] = [];
    for (let last = after; ; ) {
      const order = this.ordered();
      order.slotsAfter(last, WALK_BATCH, batch);
      const members = m.map.get(key);
      if (batch.length === 0 || members === undefined) return;
      found.length = 0;
      for (const slot of batch) if (members.has(slot)) found.push(this.peekSlot(slot));
      last = order.keyOf(batch[batch.length - 1] as number);
      yield* found;
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

  /** Times the arena's garbage was reclaimed. */
  private compactions = 0;

  /** Bytes of replaced and deleted records held until reclaimed (past GARBAGE_FLOOR), and how often they were. */
  get memory(): { garbageBytes: number; compactions: number } {
    return { garbageBytes: this.arena.garbageBytes, compactions: this.compactions };
  }

  /** This table's other way in at a start besides `loadStored`: a checkpoint. */
  get compact(): CompactLoader {
    this.idOrder = undefined;
    return this.loader;
  }

  /** A record as stored on disk, at start (table-loader.ts): false when it is not a well-formed record of the table. */
  loadStored(bytes: Uint8Array): boolean {
    this.idOrder = undefined;
    return this.loader.stored(bytes);
  }

  delete(id: string, known?: R): R | undefined {
    const slot = this.ids.get(id);
    if (slot === undefined) return undefined;
    const old = known ?? this.peekSlot(slot);
    this.unindex(old, slot);
    this.leaveOrder(slot);
    this.ids.delete(id);
    this.arena.delete(slot);
    this.decoded.delete(slot);
    return old;
  }

  /**
   * Deletes by ID without decoding the record (the reaper's bulk deletes, a follower's deletes):
   * it leaves its indexes by its stored bytes (unread-delete.ts). Answers the fields of `answer`,
   * and those the time order reads unless `time` is the one it holds the record at; undefined
   * when none is held.
   */
  deleteUnread(id: string, answer?: readonly string[], time?: number): Partial<R> | undefined {
    const slot = this.ids.get(id);
    if (slot === undefined) return undefined;
    const cached = this.decoded.get(slot);
    let fields = cached === undefined ? this.unread.unindex(slot, answer, time) : undefined;
    if (fields === undefined) {
      const record = cached ?? this.decode(this.arena.get(slot));
      this.unindex(record, slot);
      fields = record;
    }
    this.leaveOrder(slot);
    this.ids.deleteSlot(slot);
    this.arena.delete(slot);
    this.decoded.delete(slot);
    return fields;
  }

  /** Takes `slot` out of the ID order while its key is still held (an order that misses it is dropped, made again when next walked). */
  private leaveOrder(slot: number): void {
    if (this.idOrder !== undefined && !this.idOrder.delete(slot)) this.idOrder = undefined;
  }

  finishLoading(): void {
    this.idOrder = undefined;
    this.loader.finishLoading();
  }

  orderedCountBetween(from: number, until: number): number {
    let n = 0;
    for (const [time, at] of this.order.upTo(until, from)) if (time > from) n += at.size;
    return n;
  }

  orderedUpTo(until: number, limit: number, after?: [number, string]): Array<[number, string]> {
    const out: Array<[number, string]> = [];
    for (const [time, at] of this.order.upTo(until, after?.[0])) {
      if (out.length >= limit) break;
      const slots = at.toArray();
      const ids: string[] = new Array(slots.length);
      for (let i = 0; i < slots.length; i++) ids[i] = this.idOf(slots[i] as number);
      // Strings sort by their UTF-16 units without a comparator, as `byID` orders them.
      if (ids.length > 1) ids.sort();
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
    const kept = this.positional.keep(bytes);
    // Records are checked against their declaration before they are written: one that is not a map
    // of declared fields is a fault here, never kept in another form.
    if (kept === undefined) throw new Error(`${this.def.name}: record ${id} has a field its declaration does not list`);
    if (slot === undefined) {
      at = this.arena.add(kept);
      this.ids.set(id, at);
      this.idOrder?.add(at);
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
    if (this.arena.garbageBytes > Math.max(GARBAGE_FLOOR, this.arena.usedBytes)) {
      this.arena.compact();
      this.compactions++;
    }
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
    for (const t of this.parts.idTables) t.verify();
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
    this.idOrder?.verify(this.def.name, this.arena.size, (slot) => this.arena.has(slot));
  }

  /** The ID of the record in `slot`, read from its bytes (positional: the ID is the first value), nothing decoded. */
  private idOf(slot: number): string {
    const bytes = this.arena.get(slot);
    return (bytes[0] === 0xdc ? stringAt(bytes, 3) : undefined) ?? this.def.id(this.decoded.get(slot) ?? this.decode(bytes));
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
    // A unique key may already belong to another record (taken over in the same batch): it stays with it.
    for (const u of this.unique) u.table.deleteSlot(slot);
    for (const m of this.multi) m.keys(record, (k) => leaveKey(m, k, slot));
    const time = this.def.orderedBy?.time(record);
    if (time !== undefined) this.order.delete(time, slot);
  }
}
