import { type IndexDef, SEP, type TableDef } from './schema.js';
import { RECORD_CHECKS, shareRecordParts } from './record-check.js';
import { decodeRaw } from './records.js';
import type { Table } from './table.js';

const NO_MEMBERS: ReadonlySet<never> = new Set();

/**
 * One table in memory as objects: its records by ID and every index its TableDef declares.
 * Records are shared with every reader and never mutated: a change replaces the object.
 */
export class MemTable<R, I extends string> implements Table<R, I> {
  private readonly rows = new Map<string, R>();
  private readonly unique = new Map<I, Map<string, string>>();
  /** Non-unique indexes hold the records themselves: a list needs no lookup per member. */
  private readonly multi = new Map<I, Map<string, Set<R>>>();
  /** The same indexes as lists, for the write path. */
  private readonly uniqueList: Array<{ keys: IndexDef<R>['keys']; map: Map<string, string> }> = [];
  private readonly multiList: Array<{ keys: IndexDef<R>['keys']; map: Map<string, Set<R>>; sorted: Map<string, R[]> }> = [];
  /** Per non-unique index, its members under a key as an array in ID order, made on first use and dropped on change. */
  private readonly sorted = new Map<I, Map<string, R[]>>();
  /** [time, id] sorted by time then ID (the expiry index). */
  private ordered: Array<[number, string]> = [];

  constructor(readonly def: TableDef<R, I>) {
    for (const [name, idx] of Object.entries(def.indexes) as Array<[I, IndexDef<R>]>) {
      if (idx.unique) {
        const map = new Map<string, string>();
        this.unique.set(name, map);
        this.uniqueList.push({ keys: idx.keys, map });
      } else {
        const map = new Map<string, Set<R>>();
        const sorted = new Map<string, R[]>();
        this.multi.set(name, map);
        this.sorted.set(name, sorted);
        this.multiList.push({ keys: idx.keys, map, sorted });
      }
    }
  }

  get size(): number {
    return this.rows.size;
  }

  get(id: string): R | undefined {
    return this.rows.get(id);
  }

  peek(id: string): R | undefined {
    return this.rows.get(id);
  }

  has(id: string): boolean {
    return this.rows.has(id);
  }

  /** The ID a unique index maps `key` to. */
  uniqueID(index: I, key: string): string | undefined {
    return this.unique.get(index)?.get(key);
  }

  byUnique(index: I, key: string): R | undefined {
    const id = this.uniqueID(index, key);
    return id === undefined ? undefined : this.rows.get(id);
  }

  members(index: I, key: string): ReadonlySet<R> {
    return this.multi.get(index)?.get(key) ?? NO_MEMBERS;
  }

  memberCount(index: I, key: string): number {
    return this.members(index, key).size;
  }

  isMember(index: I, key: string, id: string): boolean | undefined {
    const r = this.rows.get(id);
    return r === undefined ? undefined : this.members(index, key).has(r);
  }

  values(): IterableIterator<R> {
    return this.rows.values();
  }

  globalRecords(): R[] {
    const out: R[] = [];
    for (const r of this.rows.values()) if (this.def.isGlobal(r)) out.push(r);
    return out;
  }

  loadStored(bytes: Uint8Array): boolean {
    let record: unknown;
    try {
      record = decodeRaw(bytes);
    } catch {
      return false;
    }
    if (!RECORD_CHECKS[this.def.name](record)) return false;
    shareRecordParts(record as Record<string, unknown>);
    this.put(record as R, { loading: true });
    return true;
  }

  /** The same records in ID order (kept until one of them changes: lists of one filter need no sort per request). */
  *sortedMembersAfter(index: I, key: string, after: string | undefined): IterableIterator<R> {
    const list = this.sortedMembers(index, key);
    const id = this.def.id;
    let lo = 0;
    let hi = list.length;
    if (after !== undefined)
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (id(list[mid] as R) <= after) lo = mid + 1;
        else hi = mid;
      }
    for (let i = lo; i < list.length; i++) yield list[i] as R;
  }

  memberIDs(index: I, key: string): string[] {
    return Array.from(this.members(index, key), this.def.id);
  }

  sortedMembers(index: I, key: string): readonly R[] {
    const cache = this.sorted.get(index) as Map<string, R[]>;
    let list = cache.get(key);
    if (list === undefined) {
      const set = this.multi.get(index)?.get(key);
      if (set === undefined) return [];
      const id = this.def.id;
      list = [...set].sort((a, b) => {
        const x = id(a);
        const y = id(b);
        return x < y ? -1 : x > y ? 1 : 0;
      });
      cache.set(key, list);
    }
    return list;
  }

  /** Every key a non-unique index holds. */
  indexKeys(index: I): IterableIterator<string> {
    return (this.multi.get(index) as Map<string, Set<R>>).keys();
  }

  put(record: R, options?: { bytes?: Uint8Array; loading?: boolean }): R | undefined {
    const loading = options?.loading === true;
    const id = this.def.id(record);
    const old = loading ? undefined : this.rows.get(id);
    if (old !== undefined) this.unindex(old, id);
    this.rows.set(id, record);
    for (const u of this.uniqueList) u.keys(record, (k) => u.map.set(k, id));
    for (const m of this.multiList) {
      m.keys(record, (k) => {
        let set = m.map.get(k);
        if (!set) m.map.set(k, (set = new Set()));
        set.add(record);
        if (!loading) m.sorted.delete(k);
      });
    }
    const at = this.def.orderedBy?.time(record);
    if (at !== undefined) {
      if (loading) this.ordered.push([at, id]);
      else this.ordered.splice(this.orderedPosition(at, id), 0, [at, id]);
    }
    return old;
  }

  delete(id: string): R | undefined {
    const old = this.rows.get(id);
    if (old === undefined) return undefined;
    this.unindex(old, id);
    this.rows.delete(id);
    return old;
  }

  deleteUnread(id: string, _answer?: readonly string[], _time?: number): R | undefined {
    return this.delete(id);
  }

  /** After loading with `put(record, true)`: puts the ordered index in order. */
  finishLoading(): void {
    this.ordered.sort((a, b) => a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  }

  private unindex(record: R, id: string): void {
    // A unique key may already belong to another record (taken over in the same batch).
    for (const u of this.uniqueList) u.keys(record, (k) => u.map.get(k) === id && u.map.delete(k));
    for (const m of this.multiList) {
      m.keys(record, (k) => {
        const set = m.map.get(k);
        if (!set) return;
        set.delete(record);
        m.sorted.delete(k);
        if (set.size === 0) m.map.delete(k);
      });
    }
    const at = this.def.orderedBy?.time(record);
    if (at !== undefined) {
      const i = this.orderedPosition(at, id);
      const e = this.ordered[i];
      if (e && e[0] === at && e[1] === id) this.ordered.splice(i, 1);
    }
  }

  /** First position whose entry is not before (at, id). */
  private orderedPosition(at: number, id: string): number {
    let lo = 0;
    let hi = this.ordered.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const [t, i] = this.ordered[mid] as [number, string];
      if (t < at || (t === at && i < id)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Entries ordered at or before `until`, after the cursor `after` ("time:id"), at most `limit`. */
  orderedUpTo(until: number, limit: number, after?: [number, string]): Array<[number, string]> {
    let i = after ? this.orderedPosition(after[0], after[1] + SEP) : 0;
    const out: Array<[number, string]> = [];
    while (i < this.ordered.length && out.length < limit) {
      const e = this.ordered[i++] as [number, string];
      if (e[0] > until) break;
      out.push(e);
    }
    return out;
  }

  orderedCountBetween(from: number, until: number): number {
    let n = 0;
    for (let i = this.orderedPosition(from + 1, ''); i < this.ordered.length && (this.ordered[i] as [number, string])[0] <= until; i++) n++;
    return n;
  }

  firstOrdered(): number | undefined {
    return this.ordered[0]?.[0];
  }
}
