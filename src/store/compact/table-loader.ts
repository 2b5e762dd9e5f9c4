import { fieldNames } from '../../domain/records.js';
import { type IndexDef, type TableDef, indexedFields } from '../schema.js';
import type { CompactLoader } from '../table.js';
import { RecordArena } from './arena.js';
import { type DumpPart, DumpReader, DumpWriter, type TableDumpMeta } from './dump.js';
import { IdTable } from './id-table.js';
import { KeyMemo, ValueNumbers } from './key-memo.js';
import { ValueMemo, readFields, stringAt } from './msgpack-fields.js';

type SetsMemo = KeyMemo<SlotSet[]>;
import { Positional } from './positional.js';
import { SlotSet } from './slot-set.js';
import { TimeOrder } from './time-order.js';

/** How a compact table's records are encoded, checked and decoded (memory.ts has the tokens'). */
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

/** A non-unique index: slot sets by key. */
export interface Multi {
  name: string;
  keys: IndexDef<unknown>['keys'];
  map: Map<string, SlotSet>;
  /** Members under a key in ID order, made on first use and dropped on change. */
  sorted: Map<string, Uint32Array>;
}

/** Takes `slot` out of the set `m` holds under `key`: the key's ID order dropped, the key itself once its set is empty. */
export function leaveKey(m: Multi, key: string, slot: number): void {
  const set = m.map.get(key);
  if (set === undefined) return;
  set.delete(slot);
  if (m.sorted.size !== 0) m.sorted.delete(key);
  if (set.size === 0) m.map.delete(key);
}

/** A unique index: an IdTable of slots by key, read from one field. */
export interface Unique<R> {
  name: string;
  keys: IndexDef<R>['keys'];
  table: IdTable;
  /** Which of `indexFields` the key is. */
  field: number;
}

function fieldIndex(indexFields: readonly string[], field: string | undefined): number {
  const i = field === undefined ? -1 : indexFields.indexOf(field);
  if (i === -1) throw new Error(`${field ?? 'a unique index'} must be one of the indexed fields`);
  return i;
}

/**
 * What a compact table keeps, made from its declaration: the records' bytes (a RecordArena),
 * the ID and unique keys in IdTables, the other indexes as slot sets, the time order; and how
 * a record's fields lie in its positional form. The table and its loader hold the same parts.
 */
export class TableParts<R> {
  readonly arena = new RecordArena();
  readonly ids = new IdTable();
  readonly unique: Array<Unique<R>> = [];
  readonly multi: Multi[] = [];
  /** The ordered (expiry) index. */
  readonly order = new TimeOrder();
  readonly positional: Positional;
  /** Every field of a record, in the positional form's order (the ID first): the table's declaration. */
  readonly fields: readonly string[];
  /** Every field the ID, the indexes and the time order read: all a load reads of a record. */
  readonly indexFields: readonly string[];
  /** Which of `indexFields` is the ID. */
  readonly idAt: number;
  /** Where each of `indexFields` is among `fields`. */
  readonly inFields: Int32Array;
  /** The ID table and the unique ones, and which of `indexFields` each is keyed by. */
  readonly idTables: IdTable[];
  readonly idFields: number[];

  constructor(
    readonly def: TableDef<R, string>,
    readonly codec: CompactCodec<R>,
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
    if (this.fields[0] !== codec.idField) throw new Error(`the first of the fields must be the ID, ${codec.idField}`);
    this.positional = new Positional(this.fields);
    this.idAt = fieldIndex(this.indexFields, codec.idField);
    this.inFields = Int32Array.from(this.indexFields, (f) => this.fields.indexOf(f));
    this.idTables = [this.ids, ...this.unique.map((u) => u.table)];
    this.idFields = [this.idAt, ...this.unique.map((u) => u.field)];
  }
}

/**
 * Both ways into a compact table at a start, in one place: a record as LevelDB stores it
 * (`stored`), and a checkpoint's dump (`restore`, and `dump` that writes one). Each reads
 * only the fields the indexes need, from the bytes, and stores the bytes as they are; the whole
 * record is checked when it is first decoded. The reaper's unread deletes number the values
 * the same way (unread-delete.ts).
 */
export class TableLoader<R> implements CompactLoader {
  /** Where each of `indexFields` starts in the record being read (-1: absent). */
  private readonly indexAt: Int32Array;
  /** A load's non-unique keys, computed before anything is stored: index, key, index, key... */
  private readonly loadKeys: Array<Multi | string | number> = [];
  /** Per non-unique index: the slot sets of the values a load met, by their bytes. */
  private readonly memos: SetsMemo[];
  /** Per non-unique index: which of `indexFields` it reads; and the time order's. */
  private readonly readsOf: Int32Array[];
  private readonly timeReads: Int32Array;
  /** The record being loaded: each non-unique index's sets its memo knew, and which values are not decoded. */
  private readonly found: Array<SlotSet[] | undefined>;
  private readonly memoKeys: Int32Array | Float64Array;
  private readonly decodeNot: boolean[];
  /** The indexed fields non-unique indexes read, numbered by their values' bytes; where each value ends in the record. */
  private readonly values: ValueNumbers;
  private readonly numbered: Int32Array;
  private readonly numbers: Int32Array;
  private readonly ends: Int32Array;
  /** The values a load decoded, by their bytes (forgotten when the load ends). */
  private readonly memo = new ValueMemo();
  /** The index whose keys `emitKey` adds to `loadKeys` (one function for every record). */
  private emitting: Multi | undefined;
  private readonly emitKey = (k: string) => {
    this.loadKeys.push(this.emitting as Multi, k);
  };

  constructor(private readonly parts: TableParts<R>) {
    this.indexAt = new Int32Array(parts.indexFields.length);
    const { def, indexFields, multi } = parts;
    const positions = (reads: readonly string[]) => Int32Array.from(reads, (f) => indexFields.indexOf(f));
    this.readsOf = multi.map((m) => positions((def.indexes[m.name] as IndexDef<R>).reads));
    this.timeReads = positions(def.orderedBy?.reads ?? []);
    this.memos = this.readsOf.map((reads) => new KeyMemo<SlotSet[]>(reads));
    this.found = multi.map(() => undefined);
    this.memoKeys = new Float64Array(multi.length);
    this.values = new ValueNumbers(indexFields.length);
    this.numbered = Int32Array.from(new Set(this.readsOf.flatMap((r) => [...r])));
    this.numbers = new Int32Array(indexFields.length);
    this.ends = new Int32Array(indexFields.length);
    this.decodeNot = indexFields.map(() => true);
  }

  get fields(): readonly string[] {
    return this.parts.fields;
  }

  get size(): number {
    return this.parts.arena.size;
  }

  /** Room in the ID tables for `records` while the table is empty (a load about to add about as many). */
  reserve(records: number): void {
    for (const t of this.parts.idTables) t.reserve(records);
  }

  /**
   * A record as stored on disk (a map, or positional in a store of format 3): only the fields it
   * is indexed by are read from its bytes, which are kept in the positional form. False when it
   * is not a map of declared fields nor their positional form, or those
   * fields are not as the indexes expect (a corrupt record: the start fails, naming it).
   */
  stored(bytes: Uint8Array): boolean {
    const { positional, inFields } = this.parts;
    const at = this.indexAt;
    // One pass over the bytes finds every field for the positional form; the indexed ones are read from it.
    const kept = positional.keep(bytes);
    if (kept === undefined) return false;
    const { starts, ends } = positional;
    for (let i = 0; i < at.length; i++) {
      at[i] = starts[inFields[i] as number] as number;
      this.ends[i] = ends[inFields[i] as number] as number;
    }
    return this.loadRead(bytes, kept);
  }

  /**
   * `kept` loaded under the indexed fields read from `source` at `indexAt`. A non-unique index whose values this load has met
   * before takes its slot sets from its memo; only the other values are decoded, and their keys
   * computed, before anything is stored: a field of the wrong shape leaves nothing behind.
   */
  private loadRead(source: Uint8Array, kept: Uint8Array): boolean {
    const { arena, multi, def, idAt, order, indexFields, codec } = this.parts;
    const at = this.indexAt;
    if (at[idAt] === -1) return false;
    const { memos, found, memoKeys, decodeNot, readsOf, numbers, numbered, ends } = this;
    for (let f = 0; f < decodeNot.length; f++) decodeNot[f] = true;
    for (const f of this.timeReads) decodeNot[f] = false;
    for (const f of numbered) numbers[f] = this.values.of(f, source, at[f] as number, ends[f] as number);
    for (let i = 0; i < multi.length; i++) {
      const memo = memos[i] as SetsMemo;
      const key = memo.keyOf(numbers);
      const sets = memo.get(key);
      memoKeys[i] = key;
      found[i] = sets;
      if (sets === undefined) for (const f of readsOf[i] as Int32Array) decodeNot[f] = false;
    }
    const fields = readFields(source, indexFields, at, codec.decodeValue, decodeNot, this.memo) as R | undefined;
    if (fields === undefined) return false;
    const keys = this.loadKeys;
    keys.length = 0;
    let time: number | undefined;
    try {
      for (let i = 0; i < multi.length; i++) {
        if (found[i] !== undefined) continue;
        const m = multi[i] as Multi;
        this.emitting = m;
        keys.push(i);
        m.keys(fields, this.emitKey);
      }
      time = def.orderedBy?.time(fields);
      if (time !== undefined && !Number.isFinite(time)) return false;
    } catch {
      return false;
    }
    const slot = arena.add(kept);
    if (!this.setIds(source, slot)) return false;
    for (let i = 0; i < multi.length; i++) {
      const sets = found[i];
      if (sets !== undefined) for (let k = 0; k < sets.length; k++) (sets[k] as SlotSet).add(slot);
    }
    // The keys computed, by index: each index's number, then its keys (`emitKey` pushed them).
    let index = -1;
    let made: SlotSet[] | undefined;
    for (let i = 0; i < keys.length; i++) {
      const item = keys[i] as Multi | string | number;
      if (typeof item === 'number') {
        if (made !== undefined) memos[index]?.set(memoKeys[index] as number, made);
        index = item;
        made = (memoKeys[index] as number) >= 0 ? [] : undefined;
        continue;
      }
      const m = item as Multi;
      const k = keys[++i] as string;
      let set = m.map.get(k);
      if (!set) m.map.set(k, (set = new SlotSet()));
      set.add(slot);
      made?.push(set);
    }
    if (made !== undefined) memos[index]?.set(memoKeys[index] as number, made);
    if (time !== undefined) order.add(time, slot, true);
    return true;
  }

  /**
   * The ID and unique keys of the record at `slot` from `source` (at `indexAt`) into their tables
   * (no string made of a UUID). False, with the record taken out again, when one is not a string.
   */
  private setIds(source: Uint8Array, slot: number): boolean {
    const { arena, idTables, idFields } = this.parts;
    const at = this.indexAt;
    for (let t = 0; t < idTables.length; t++) {
      const pos = at[idFields[t] as number] as number;
      if (pos === -1 || (idTables[t] as IdTable).setAt(source, pos, slot)) continue;
      // Not a string after all: what was set is undone (each key found again by its string).
      for (let d = 0; d < t; d++) {
        const p = at[idFields[d] as number] as number;
        const key = p === -1 ? undefined : stringAt(source, p);
        if (key !== undefined && idTables[d]?.get(key) === slot) idTables[d]?.delete(key);
      }
      arena.delete(slot);
      return false;
    }
    return true;
  }

  /**
   * The table as a checkpoint keeps it (dump.ts): the arena's records packed, the ID tables'
   * arrays as they are, and each index's members. The table must not change until the parts are written.
   */
  dump(): { meta: TableDumpMeta; parts: DumpPart[] } {
    const { arena: table, ids, unique, multi, order } = this.parts;
    const w = new DumpWriter();
    const arena = table.dump();
    const records = arena.records();
    const times = w.sets(order.atTime);
    const meta: TableDumpMeta = {
      arena: {
        top: arena.top,
        chunkOf: w.add(arena.chunkOf),
        offsetOf: w.add(arena.offsetOf),
        lengthOf: w.add(arena.lengthOf),
        chunks: arena.chunks.map(({ size, fill }) => ({ part: w.stream(fill, size, records), fill })),
      },
      ids: w.idTable(ids),
      unique: unique.map((u) => ({ name: u.name, ...w.idTable(u.table) })),
      multi: multi.map((m) => ({ name: m.name, ...w.sets(m.map) })),
      times: { ...times, keys: w.add(Float64Array.from(times.keys)) },
    };
    return { meta, parts: w.parts };
  }

  /** Takes a dump read back into this new, empty table; throws when it does not fit together. */
  restore(meta: TableDumpMeta, parts: readonly Buffer[]): void {
    const { arena, ids, unique, multi, order } = this.parts;
    if (arena.size !== 0) throw new Error('a table is restored only when empty');
    const r = new DumpReader(parts);
    const a = meta.arena;
    arena.restore({
      top: a.top,
      chunkOf: r.u32(a.chunkOf),
      offsetOf: r.u32(a.offsetOf),
      lengthOf: r.u32(a.lengthOf),
      chunks: a.chunks.map((c) => r.part(c.part)),
      fills: a.chunks.map((c) => c.fill),
    });
    r.idTable(ids, meta.ids);
    if (ids.size !== arena.size) throw new RangeError(`${ids.size} IDs for ${arena.size} records`);
    const has = (slot: number) => arena.has(slot);
    for (const u of unique) {
      const d = meta.unique.find((x) => x.name === u.name);
      if (d === undefined) throw new RangeError(`no unique index ${u.name}`);
      r.idTable(u.table, d);
    }
    for (const m of multi) {
      const d = meta.multi.find((x) => x.name === m.name);
      if (d === undefined) throw new RangeError(`no index ${m.name}`);
      r.sets(d, m.map, has);
    }
    r.sets({ ...meta.times, keys: Array.from(r.f64(meta.times.keys)) }, order.atTime, has);
    order.finishLoading();
  }

  /** The load is over: the ID tables' inserts placed, the time order sorted, the values it decoded forgotten. */
  finishLoading(): void {
    for (const t of this.parts.idTables) t.settle();
    this.parts.order.finishLoading();
    this.memo.clear();
    for (const m of this.memos) m.clear();
    this.values.clear();
  }
}
