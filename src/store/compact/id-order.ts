import type { IdTable } from './id-table.js';
import { uuidWords } from './uuid-words.js';

/**
 * A table's slots in the order of their IDs, kept as records come and go: what a paged list
 * walks (`?per_page=` from a cursor) and an unpaged one streams, at ten million tokens, without
 * sorting the members of an index each time one of them changes.
 *
 * The slots lie in chunks of at most CAP, each in order and every chunk's after the one
 * before it (a B+ tree's leaves with a sorted array of them for its inner levels): an insert
 * or delete is two binary searches and a move of at most CAP slots; a full chunk splits in
 * two, an emptied one goes, a nearly empty one joins its neighbour. Keys are read where the
 * table's IdTable keeps them: a canonical UUID's four words compare in the order of its text
 * (hex digits and dashes at fixed places), so a comparison reads four numbers and makes no
 * string; a key kept as a string (rare) compares as text.
 *
 * Made whole on first use from the table's live slots (a radix sort by the first word, runs of
 * one word put in order by whole key): a few hundred milliseconds at ten million, 4-5 bytes a
 * slot afterwards. A walk asks for a batch of slots after a key (`slotsAfter`), so a change
 * between batches never leaves it holding a stale position.
 */

/** Slots a chunk holds at most; a full one splits in two. */
const CAP = 1024;
/** Slots a chunk is given when the order is made whole: room for inserts before the first splits. */
const FILL = 768;
/** A chunk holding fewer than this after a delete joins a neighbour that has room. */
const SPARSE = CAP >> 3;

const hex8 = (w: number): string => w.toString(16).padStart(8, '0');

/** The canonical text of a UUID from its four words (id-table.ts's `uuidWords` the other way). */
export function uuidText(a: number, b: number, c: number, d: number): string {
  const y = hex8(b);
  const z = hex8(c);
  return `${hex8(a)}-${y.slice(0, 4)}-${y.slice(4)}-${z.slice(0, 4)}-${z.slice(4)}${hex8(d)}`;
}

/** The key `ids` holds for `slot`, as text. */
export function slotKey(ids: IdTable, slot: number): string {
  const named = ids.namedKey(slot);
  if (named !== undefined) return named;
  const k = ids.slotWords;
  const i = slot * 4;
  return uuidText(k[i] as number, k[i + 1] as number, k[i + 2] as number, k[i + 3] as number);
}

/** The keys `ids` holds for two slots, compared as their texts compare (four numbers for two UUIDs). */
export function compareSlotKeys(ids: IdTable, a: number, b: number): number {
  if (ids.namedKey(a) !== undefined || ids.namedKey(b) !== undefined) {
    const x = slotKey(ids, a);
    const y = slotKey(ids, b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  const k = ids.slotWords;
  const i = a * 4;
  const j = b * 4;
  for (let w = 0; w < 4; w++) {
    const x = k[i + w] as number;
    const y = k[j + w] as number;
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}

export class IdOrder {
  private readonly chunks: Uint32Array[] = [];
  private readonly lens: number[] = [];
  private count = 0;
  /** Where the last `bound` ended: a chunk and a position in it (possibly its length). */
  private atChunk = 0;
  private atIndex = 0;
  private readonly target = new Uint32Array(4);

  private constructor(private readonly ids: IdTable) {}

  /** The order of `slots` (every live slot of the table, ascending), whose keys `ids` holds. */
  static of(ids: IdTable, slots: Uint32Array): IdOrder {
    const order = new IdOrder(ids);
    const sorted = order.sorted(slots);
    for (let i = 0; i < sorted.length; i += FILL) {
      const part = sorted.subarray(i, Math.min(i + FILL, sorted.length));
      const chunk = new Uint32Array(CAP);
      chunk.set(part);
      order.chunks.push(chunk);
      order.lens.push(part.length);
    }
    order.count = sorted.length;
    return order;
  }

  get size(): number {
    return this.count;
  }

  /** Bytes held by the chunks. */
  get bytes(): number {
    return this.chunks.length * CAP * 4;
  }

  /** The key of `slot` as text. */
  keyOf(slot: number): string {
    return slotKey(this.ids, slot);
  }

  /** The keys of two slots compared as their texts compare. */
  compare(a: number, b: number): number {
    return compareSlotKeys(this.ids, a, b);
  }

  /** Puts `slot` (a key not held yet) in its place. */
  add(slot: number): void {
    const { chunks, lens } = this;
    this.count++;
    if (chunks.length === 0) {
      const chunk = new Uint32Array(CAP);
      chunk[0] = slot;
      chunks.push(chunk);
      lens.push(1);
      return;
    }
    this.bound((s) => this.compare(s, slot), false);
    let c = this.atChunk;
    let i = this.atIndex;
    let chunk = chunks[c] as Uint32Array;
    if (lens[c] === CAP) {
      const half = CAP >> 1;
      const right = new Uint32Array(CAP);
      right.set(chunk.subarray(half));
      chunks.splice(c + 1, 0, right);
      lens.splice(c + 1, 0, CAP - half);
      lens[c] = half;
      if (i > half) {
        c++;
        i -= half;
        chunk = right;
      }
    }
    const len = lens[c] as number;
    chunk.copyWithin(i + 1, i, len);
    chunk[i] = slot;
    lens[c] = len + 1;
  }

  /** Takes `slot` out, found by its key (still the one it was added under); false when it is not there. */
  delete(slot: number): boolean {
    const { chunks, lens } = this;
    if (this.count === 0) return false;
    this.bound((s) => this.compare(s, slot), false);
    let c = this.atChunk;
    let i = this.atIndex;
    if (i === lens[c]) {
      c++;
      i = 0;
    }
    const chunk = chunks[c];
    if (chunk === undefined || chunk[i] !== slot) return false;
    const len = lens[c] as number;
    chunk.copyWithin(i, i + 1, len);
    lens[c] = len - 1;
    this.count--;
    if (len === 1) {
      chunks.splice(c, 1);
      lens.splice(c, 1);
    } else if (len - 1 < SPARSE) {
      if (c + 1 < chunks.length && len - 1 + (lens[c + 1] as number) <= CAP >> 1) this.join(c);
      else if (c > 0 && len - 1 + (lens[c - 1] as number) <= CAP >> 1) this.join(c - 1);
    }
    return true;
  }

  /** Up to `max` slots after the key `after` (from the first with none), in order, into `out` (emptied first). */
  slotsAfter(after: string | undefined, max: number, out: number[]): void {
    out.length = 0;
    let c = 0;
    let i = 0;
    if (after !== undefined) {
      const canonical = uuidWords(after, this.target);
      this.bound((s) => this.compareTo(s, after, canonical), true);
      c = this.atChunk;
      i = this.atIndex;
    }
    const { chunks, lens } = this;
    while (c < chunks.length && out.length < max) {
      const chunk = chunks[c] as Uint32Array;
      const len = lens[c] as number;
      while (i < len && out.length < max) out.push(chunk[i++] as number);
      if (i >= len) {
        c++;
        i = 0;
      }
    }
  }

  /** Throws, naming what is wrong, unless the order holds `expected` slots, each chunk neither empty nor over CAP, every key after the one before. */
  verify(name: string, expected: number, live: (slot: number) => boolean): void {
    let n = 0;
    let prev = -1;
    for (let c = 0; c < this.chunks.length; c++) {
      const len = this.lens[c] as number;
      if (len < 1 || len > CAP) throw new Error(`${name}: chunk ${c} of the ID order holds ${len} slots`);
      const chunk = this.chunks[c] as Uint32Array;
      for (let i = 0; i < len; i++) {
        const slot = chunk[i] as number;
        if (!live(slot)) throw new Error(`${name}: the ID order holds slot ${slot}, which holds no record`);
        if (prev !== -1 && this.compare(prev, slot) >= 0)
          throw new Error(`${name}: the ID order holds ${this.keyOf(slot)} after ${this.keyOf(prev)}`);
        prev = slot;
        n++;
      }
    }
    if (n !== this.count || n !== expected)
      throw new Error(`${name}: the ID order holds ${n} slots (count ${this.count}) for ${expected} records`);
  }

  /** Moves chunk c + 1's slots to the end of chunk c, and drops c + 1. */
  private join(c: number): void {
    const into = this.chunks[c] as Uint32Array;
    const from = (this.chunks[c + 1] as Uint32Array).subarray(0, this.lens[c + 1]);
    into.set(from, this.lens[c]);
    this.lens[c] = (this.lens[c] as number) + from.length;
    this.chunks.splice(c + 1, 1);
    this.lens.splice(c + 1, 1);
  }

  /** `slot`'s key against `id` (whose words are in `target` when `canonical`), as texts compare. */
  private compareTo(slot: number, id: string, canonical: boolean): number {
    if (canonical && this.ids.namedKey(slot) === undefined) {
      const k = this.ids.slotWords;
      const i = slot * 4;
      for (let w = 0; w < 4; w++) {
        const x = k[i + w] as number;
        const y = this.target[w] as number;
        if (x !== y) return x < y ? -1 : 1;
      }
      return 0;
    }
    const x = this.keyOf(slot);
    return x < id ? -1 : x > id ? 1 : 0;
  }

  /**
   * Finds the first place whose slot's key is past the target (`cmp` compares a slot's key with
   * it): above it when `strictly`, else at or above. Sets atChunk and atIndex (an index equal to
   * the chunk's length: the place is the next chunk's start, or the end).
   */
  private bound(cmp: (slot: number) => number, strictly: boolean): void {
    const { chunks, lens } = this;
    const past = (slot: number) => {
      const d = cmp(slot);
      return strictly ? d > 0 : d >= 0;
    };
    let lo = 0;
    let hi = chunks.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (past((chunks[mid] as Uint32Array)[0] as number)) hi = mid;
      else lo = mid + 1;
    }
    if (lo === 0) {
      this.atChunk = 0;
      this.atIndex = 0;
      return;
    }
    const c = lo - 1;
    const chunk = chunks[c] as Uint32Array;
    let a = 0;
    let b = lens[c] as number;
    while (a < b) {
      const mid = (a + b) >>> 1;
      if (past(chunk[mid] as number)) b = mid;
      else a = mid + 1;
    }
    this.atChunk = c;
    this.atIndex = a;
  }

  /** `slots` in key order: a radix sort of the UUID keys by their first word, runs of one word by whole key, merged with the keys kept as strings. */
  private sorted(slots: Uint32Array): Uint32Array {
    const named = new Set(this.ids.namedSlots());
    const words = this.ids.slotWords;
    const n = slots.length - (named.size === 0 ? 0 : slots.filter((s) => named.has(s)).length);
    let keys = new Uint32Array(n);
    let vals = new Uint32Array(n);
    let u = 0;
    for (const s of slots)
      if (named.size === 0 || !named.has(s)) {
        keys[u] = words[s * 4] as number;
        vals[u++] = s;
      }
    // Two passes of sixteen bits, least significant first: stable, so the second leaves the first's order within a bucket.
    let keys2 = new Uint32Array(n);
    let vals2 = new Uint32Array(n);
    const counts = new Uint32Array(65537);
    for (const shift of [0, 16]) {
      counts.fill(0);
      for (let i = 0; i < n; i++) (counts[(((keys[i] as number) >>> shift) & 0xffff) + 1] as number)++;
      for (let b = 0; b < 65536; b++) counts[b + 1] = (counts[b + 1] as number) + (counts[b] as number);
      for (let i = 0; i < n; i++) {
        const at = counts[((keys[i] as number) >>> shift) & 0xffff] as number;
        counts[((keys[i] as number) >>> shift) & 0xffff] = at + 1;
        keys2[at] = keys[i] as number;
        vals2[at] = vals[i] as number;
      }
      [keys, keys2] = [keys2, keys];
      [vals, vals2] = [vals2, vals];
    }
    // Keys sharing a first word (a few thousand pairs among ten million random UUIDs), in order by the whole key.
    const byKey = (a: number, b: number) => this.compare(a, b);
    for (let start = 0, i = 1; i <= n; i++) {
      if (i < n && keys[i] === keys[start]) continue;
      if (i - start > 1) vals.set(Array.from(vals.subarray(start, i)).sort(byKey), start);
      start = i;
    }
    if (named.size === 0) return vals;
    const others = [...named].sort(byKey);
    const out = new Uint32Array(n + others.length);
    let i = 0;
    let j = 0;
    for (let o = 0; o < out.length; o++)
      out[o] =
        j >= others.length || (i < n && this.compare(vals[i] as number, others[j] as number) < 0)
          ? (vals[i++] as number)
          : (others[j++] as number);
    return out;
  }
}
