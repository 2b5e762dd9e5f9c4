import { randomBytes } from 'node:crypto';
import { stringAt } from './msgpack-fields.js';
import { PendingInserts } from './pending-inserts.js';
import { uuidWords, uuidWordsAt } from './uuid-words.js';

/**
 * A hash table from IDs to slot numbers that holds no JS object per entry. A slot has one key:
 * a UUID key is kept as its 16 bytes (four 32-bit words) in a typed array indexed by the slot,
 * and the hash table beside it holds each position's slot and its key's hash side by side (8
 * bytes a position, one cache line for both; the key compared, where the slot keeps it, only
 * when the hash matches): a million entries are 32 MB in two typed arrays that the garbage
 * collector never walks (40 MB with the key beside the slot at every position of a table
 * under 0.7 full).
 * Open addressing with linear probing and backward-shift deletion (no tombstones); the table
 * doubles past a load of 0.7. A key that is not a canonical lower-case UUID (a secret chosen
 * by an operator, `anonymous`) goes to a small Map beside it, exactly as given.
 *
 * Slots are small dense numbers (a `RecordArena`'s), and each maps from one key at most: a key
 * set to a slot takes the slot from the key it had, as a record's new ID or secret replaces its
 * old one.
 *
 * A table filled from empty (a start's load, a staged store) defers its inserts: each new slot's
 * words and hash are noted in arrival order, and the first read (or the load's end, `settle`)
 * places them all in the order of their home positions. Placed one by one as they arrive, each
 * insert into a table of millions is a cache miss (~1 us at ten million); in home order the
 * probes walk the table front to back. The order is a stable counting sort by the home's top
 * bits, so a key noted twice ends at the later slot, as one set after another leaves it.
 */

const EMPTY = 0xffffffff;
const MIN_CAPACITY = 1024;
/** Positions of the table one bucket of a settle's sort spans at most (32 KB of entries: a core's cache holds it). */
const SETTLE_SPAN_BITS = 12;

/**
 * A 32-bit mix of the four words and a table's seed. Each table has a seed of its own, so the
 * order another table holds its keys in (a snapshot is sent in it) is no order for this one:
 * keys arriving sorted by their home in a table of the same hash would pile up in one probe
 * run, each insert walking it to its end (a secondary's catch-up of ten million tokens spent
 * 80 of its 115 s of CPU there). Keys chosen to collide cannot be chosen without the seed.
 */
function hashWords(a: number, b: number, c: number, d: number, seed: number): number {
  let h = Math.imul(a ^ seed, 0x85ebca6b);
  h = Math.imul(h ^ b ^ (h >>> 13), 0xc2b2ae35);
  h = Math.imul(h ^ c ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ d ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** An IdTable as a checkpoint keeps it. */
export interface IdTableDump {
  seed: number;
  used: number;
  highest: number;
  other: Array<[string, number]>;
  keys: Uint32Array;
  /** Each position's slot and its key's hash, side by side. */
  entries: Uint32Array;
}

export class IdTable {
  /** Four words of key per slot (a slot's words are stale when no position holds the slot). */
  private keys: Uint32Array = new Uint32Array(MIN_CAPACITY * 4);
  /**
   * Position p's slot at 2p (EMPTY where there is none) and the hash of its key at 2p + 1: a
   * probe compares the hash before reading the key, which lies elsewhere in memory (a cache
   * miss per position walked), and the table grows and deletes without reading keys at all.
   * Side by side, a probe's slot and hash are one cache miss, where two arrays made it two.
   */
  private entries: Uint32Array;
  /** Positions - 1 (positions are a power of two). */
  private mask: number;
  private used = 0;
  /** The highest slot given words so far: a slot above it has no key to give up. */
  private highest = -1;
  /** Keys that are not canonical UUIDs, exactly as given, and the same the other way. */
  private readonly other = new Map<string, number>();
  private readonly otherOf = new Map<number, string>();
  private readonly words = new Uint32Array(4);
  /** This table's hash seed (see hashWords). */
  private seed = randomBytes(4).readUInt32LE(0);
  /** Inserts deferred while the table fills from empty (each slot above every one before it); undefined once settled. */
  private pending: PendingInserts | undefined = new PendingInserts(MIN_CAPACITY);

  constructor(expected = 0) {
    let capacity = MIN_CAPACITY;
    while (capacity * 0.7 < expected) capacity *= 2;
    this.entries = emptyEntries(capacity);
    this.mask = capacity - 1;
  }

  get size(): number {
    this.settle();
    return this.used + this.other.size;
  }

  /**
   * Room for `expected` keys while the table is empty (a load about to add them): it does not
   * double its way there, placing every key again at each step. A table holding keys is left as it is.
   */
  reserve(expected: number): void {
    if (this.used + this.other.size !== 0 || this.highest !== -1) return;
    this.pending?.reserve(expected);
    let capacity = this.mask + 1;
    while (capacity * 0.7 < expected) capacity *= 2;
    if (capacity !== this.mask + 1) {
      this.entries = emptyEntries(capacity);
      this.mask = capacity - 1;
    }
    let slots = this.keys.length / 4;
    while (slots < expected) slots *= 2;
    if (slots * 4 !== this.keys.length) this.keys = new Uint32Array(slots * 4);
  }

  /** Bytes held by the typed arrays (what a million entries cost, without the Map of other keys). */
  get bytes(): number {
    this.settle();
    return this.keys.byteLength + this.entries.byteLength;
  }

  /** The slot `id` maps to, or undefined. */
  get(id: string): number | undefined {
    this.settle();
    const w = this.words;
    if (!uuidWords(id, w)) return this.other.get(id);
    const pos = this.find(w[0] as number, w[1] as number, w[2] as number, w[3] as number);
    return pos < 0 ? undefined : this.entries[pos * 2];
  }

  has(id: string): boolean {
    return this.get(id) !== undefined;
  }

  /** Maps `id` to `slot` (a slot below 2^32 - 1), replacing what it mapped to and what mapped to `slot`. */
  set(id: string, slot: number): void {
    if (!(slot >= 0 && slot < EMPTY && Number.isInteger(slot))) throw new RangeError(`slot out of range: ${slot}`);
    if (uuidWords(id, this.words)) {
      this.setWords(slot);
      return;
    }
    if (this.other.get(id) === slot) return;
    this.release(slot);
    const had = this.other.get(id);
    if (had !== undefined) this.otherOf.delete(had);
    this.other.set(id, slot);
    this.otherOf.set(slot, id);
  }

  /**
   * `set` with the ID given as a msgpack string at `pos` of `bytes` (a stored record): a UUID
   * is read from the bytes; anything else as a string. False when no string is there.
   */
  setAt(bytes: Uint8Array, pos: number, slot: number): boolean {
    if (bytes[pos] === 0xd9 && bytes[pos + 1] === 36 && uuidWordsAt(bytes, pos + 2, this.words)) {
      this.setWords(slot);
      return true;
    }
    const id = stringAt(bytes, pos);
    if (id === undefined) return false;
    this.set(id, slot);
    return true;
  }

  /** Removes `id`; whether it was there. */
  delete(id: string): boolean {
    this.settle();
    const w = this.words;
    if (!uuidWords(id, w)) {
      const slot = this.other.get(id);
      if (slot === undefined) return false;
      this.other.delete(id);
      this.otherOf.delete(slot);
      return true;
    }
    const pos = this.find(w[0] as number, w[1] as number, w[2] as number, w[3] as number);
    if (pos < 0) return false;
    this.removeAt(pos);
    return true;
  }

  /** Removes the key `slot` has, if it still maps to `slot` (a key another slot took over stays): whether it did. */
  deleteSlot(slot: number): boolean {
    const before = this.size;
    this.release(slot);
    return this.size < before;
  }

  /** The longest run of filled positions (what a probe may walk): for tests. */
  longestRun(): number {
    this.settle();
    let longest = 0;
    let run = 0;
    const positions = this.mask + 1;
    for (let i = 0; i < positions * 2; i++) {
      if (this.entries[(i & this.mask) * 2] === EMPTY) run = 0;
      else longest = Math.max(longest, Math.min(++run, positions));
    }
    return longest;
  }

  /** The keys' words, four per slot (a slot's are stale when no position holds it); replaced when the table widens. */
  get slotWords(): Uint32Array {
    return this.keys;
  }

  /** The key of `slot` when it is kept as a string (not a canonical UUID). */
  namedKey(slot: number): string | undefined {
    return this.otherOf.size === 0 ? undefined : this.otherOf.get(slot);
  }

  /** The slots whose keys are kept as strings. */
  namedSlots(): IterableIterator<number> {
    return this.otherOf.keys();
  }

  /** Every slot held, in no particular order. */
  *values(): IterableIterator<number> {
    this.settle();
    const entries = this.entries;
    for (let i = 0; i < entries.length; i += 2) if (entries[i] !== EMPTY) yield entries[i] as number;
    yield* this.other.values();
  }

  /** What a checkpoint keeps: the typed arrays as they are, and the other keys. */
  dump(): IdTableDump {
    this.settle();
    return {
      seed: this.seed,
      used: this.used,
      highest: this.highest,
      other: [...this.other],
      keys: this.keys,
      entries: this.entries,
    };
  }

  /** Takes the state of a dump, read back; throws when its arrays cannot be an IdTable's. */
  restore(d: IdTableDump): void {
    const n = d.entries.length / 2;
    if (
      !Number.isInteger(d.seed) ||
      !Number.isInteger(n) ||
      n < MIN_CAPACITY ||
      (n & (n - 1)) !== 0 ||
      d.keys.length % 4 !== 0 ||
      d.keys.length / 4 <= d.highest ||
      d.used > n
    )
      throw new RangeError('not the arrays of an ID table');
    this.pending = undefined;
    this.seed = d.seed >>> 0;
    this.keys = d.keys;
    this.entries = d.entries;
    this.mask = n - 1;
    this.used = d.used;
    this.highest = d.highest;
    this.other.clear();
    this.otherOf.clear();
    for (const [k, slot] of d.other) {
      this.other.set(k, slot);
      this.otherOf.set(slot, k);
    }
  }

  /** Maps the key in `this.words` to `slot`. */
  private setWords(slot: number): void {
    const w = this.words;
    const a = w[0] as number;
    const b = w[1] as number;
    const c = w[2] as number;
    const d = w[3] as number;
    const k = slot * 4;
    if (k + 4 > this.keys.length) this.widen(slot);
    const keys = this.keys;
    const h = hashWords(a, b, c, d, this.seed);
    if (this.pending !== undefined) {
      // A new slot while the table fills is noted, placed later; any other settles the table first.
      if (slot > this.highest) {
        this.releaseNamed(slot);
        this.highest = slot;
        keys[k] = a;
        keys[k + 1] = b;
        keys[k + 2] = c;
        keys[k + 3] = d;
        this.pending.note(slot, h);
        return;
      }
      this.settle();
    }
    if (keys[k] === a && keys[k + 1] === b && keys[k + 2] === c && keys[k + 3] === d && this.holds(slot)) return;
    // A slot never given words can have only a key kept as a string: no probe for its old words.
    if (slot > this.highest) {
      this.releaseNamed(slot);
      this.highest = slot;
    } else this.release(slot);
    let found = this.findHashed(a, b, c, d, h);
    keys[k] = a;
    keys[k + 1] = b;
    keys[k + 2] = c;
    keys[k + 3] = d;
    if (found >= 0) {
      // The key moves from the slot it had.
      this.entries[found * 2] = slot;
      return;
    }
    if ((this.used + 1) / (this.mask + 1) > 0.7) {
      this.grow();
      found = this.findHashed(a, b, c, d, h);
    }
    // Not found: ~found is the empty position the probe ended at, where the key goes.
    const at = ~found * 2;
    this.entries[at] = slot;
    this.entries[at + 1] = h;
    this.used++;
  }

  /**
   * Places the inserts deferred while the table filled (see the class's note), and defers no
   * more: a load calls it at its end so that its first read does not pay for them.
   */
  settle(): void {
    const pending = this.pending;
    if (pending === undefined) return;
    this.pending = undefined;
    const n = pending.count;
    if (n === 0) return;
    // Room for them all at once (the table held none of these: no doubling on the way).
    let capacity = this.mask + 1;
    while ((this.used + n) / capacity > 0.7) capacity *= 2;
    if (capacity !== this.mask + 1) this.growTo(capacity);
    const sorted = pending.byHome(this.mask, SETTLE_SPAN_BITS);
    const { keys, entries } = this;
    for (let i = 0; i < n * 2; i += 2) {
      const slot = sorted[i] as number;
      const h = sorted[i + 1] as number;
      const k = slot * 4;
      const found = this.findHashed(keys[k] as number, keys[k + 1] as number, keys[k + 2] as number, keys[k + 3] as number, h);
      if (found >= 0) {
        // Noted twice: the later slot takes the key (the sort keeps their order).
        entries[found * 2] = slot;
        continue;
      }
      entries[~found * 2] = slot;
      entries[~found * 2 + 1] = h;
      this.used++;
    }
  }

  /**
   * Walks the table and throws, naming what is wrong, unless every invariant holds (as
   * TigerBeetle's structures have a verify() their fuzzers call after each step): each
   * position's hash is its slot's key's; each key is found from its home by a probe that meets
   * no empty position before it; no slot is held twice; the count is the positions held, below
   * 0.7 of the table; the keys kept as strings map both ways.
   */
  verify(): void {
    this.settle();
    const { entries, mask, keys } = this;
    let held = 0;
    const seen = new Set<number>();
    for (let pos = 0; pos <= mask; pos++) {
      const slot = entries[pos * 2] as number;
      if (slot === EMPTY) continue;
      held++;
      if (seen.has(slot)) throw new Error(`IdTable: slot ${slot} is held at two positions`);
      seen.add(slot);
      if (slot > this.highest) throw new Error(`IdTable: slot ${slot} is above the highest given words (${this.highest})`);
      const k = slot * 4;
      const h = hashWords(keys[k] as number, keys[k + 1] as number, keys[k + 2] as number, keys[k + 3] as number, this.seed);
      if (entries[pos * 2 + 1] !== h) throw new Error(`IdTable: position ${pos} holds slot ${slot} under a hash that is not its key's`);
      // No empty position between the key's home and where it sits: a lookup would stop there.
      for (let at = h & mask; at !== pos; at = (at + 1) & mask)
        if (entries[at * 2] === EMPTY) throw new Error(`IdTable: slot ${slot} sits past an empty position of its probe run`);
    }
    if (held !== this.used) throw new Error(`IdTable: ${held} positions held, but the count says ${this.used}`);
    if (this.used > (mask + 1) * 0.7) throw new Error(`IdTable: ${this.used} keys in ${mask + 1} positions, over the 0.7 load`);
    if (this.other.size !== this.otherOf.size) throw new Error('IdTable: the keys kept as strings do not map both ways');
    for (const [id, slot] of this.other) {
      if (this.otherOf.get(slot) !== id) throw new Error(`IdTable: key ${JSON.stringify(id)} and its slot ${slot} disagree`);
      if (seen.has(slot)) throw new Error(`IdTable: slot ${slot} has a UUID key and a string key`);
    }
  }

  /** Whether a position holds `slot` (under the key its words say). */
  private holds(slot: number): boolean {
    const keys = this.keys;
    const k = slot * 4;
    if (k + 4 > keys.length) return false;
    const pos = this.find(keys[k] as number, keys[k + 1] as number, keys[k + 2] as number, keys[k + 3] as number);
    return pos >= 0 && this.entries[pos * 2] === slot;
  }

  /** Removes the key `slot` has, if any. */
  private release(slot: number): void {
    this.releaseNamed(slot);
    if (slot > this.highest) return;
    const keys = this.keys;
    const k = slot * 4;
    const pos = this.find(keys[k] as number, keys[k + 1] as number, keys[k + 2] as number, keys[k + 3] as number);
    if (pos >= 0 && this.entries[pos * 2] === slot) this.removeAt(pos);
  }

  /** Removes the key kept as a string that `slot` has, if any. */
  private releaseNamed(slot: number): void {
    if (this.otherOf.size === 0) return;
    const named = this.otherOf.get(slot);
    if (named === undefined) return;
    this.otherOf.delete(slot);
    this.other.delete(named);
  }

  /** Empties position `pos`; later entries of the probe run move up, so no lookup ever stops early. */
  private removeAt(at: number): void {
    const { entries, mask } = this;
    let pos = at;
    let next = (pos + 1) & mask;
    while (entries[next * 2] !== EMPTY) {
      const home = (entries[next * 2 + 1] as number) & mask;
      // The entry at `next` may fill `pos` if its home is not cyclically within (pos, next].
      if ((next > pos && (home <= pos || home > next)) || (next < pos && home <= pos && home > next)) {
        entries[pos * 2] = entries[next * 2] as number;
        entries[pos * 2 + 1] = entries[next * 2 + 1] as number;
        pos = next;
      }
      next = (next + 1) & mask;
    }
    entries[pos * 2] = EMPTY;
    this.used--;
  }

  private find(a: number, b: number, c: number, d: number): number {
    const pos = this.findHashed(a, b, c, d, hashWords(a, b, c, d, this.seed));
    return pos < 0 ? -1 : pos;
  }

  /** The position of the key (its hash `h`), or ~(the empty position its probe ended at). */
  private findHashed(a: number, b: number, c: number, d: number, h: number): number {
    const { keys, entries, mask } = this;
    let pos = h & mask;
    for (;;) {
      const s = entries[pos * 2] as number;
      if (s === EMPTY) return ~pos;
      if (entries[pos * 2 + 1] === h) {
        const k = s * 4;
        if (keys[k] === a && keys[k + 1] === b && keys[k + 2] === c && keys[k + 3] === d) return pos;
      }
      pos = (pos + 1) & mask;
    }
  }

  /** Room for the words of `slot` (slots are dense: the array doubles). */
  private widen(slot: number): void {
    let n = this.keys.length / 4;
    while (n <= slot) n *= 2;
    const keys = new Uint32Array(n * 4);
    keys.set(this.keys);
    this.keys = keys;
  }

  private grow(): void {
    this.growTo((this.mask + 1) * 2);
  }

  /** `capacity` positions (a power of two above the count's 0.7), every key placed again. */
  private growTo(capacity: number): void {
    const old = this.entries;
    const entries = emptyEntries(capacity);
    const mask = capacity - 1;
    // Each key placed by its stored hash: no key is read.
    for (let i = 0; i < old.length; i += 2) {
      const slot = old[i] as number;
      if (slot === EMPTY) continue;
      const h = old[i + 1] as number;
      let pos = h & mask;
      while (entries[pos * 2] !== EMPTY) pos = (pos + 1) & mask;
      entries[pos * 2] = slot;
      entries[pos * 2 + 1] = h;
    }
    this.entries = entries;
    this.mask = mask;
  }
}

/** `capacity` positions, each with no slot (its hash word 0). */
function emptyEntries(capacity: number): Uint32Array {
  const entries = new Uint32Array(capacity * 2);
  for (let i = 0; i < entries.length; i += 2) entries[i] = EMPTY;
  return entries;
}
