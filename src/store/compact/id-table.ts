import { randomBytes } from 'node:crypto';
import { stringAt } from './scan.js';

/**
 * A hash table from IDs to slot numbers that holds no JS object per entry. A slot has one key:
 * a UUID key is kept as its 16 bytes (four 32-bit words) in a typed array indexed by the slot,
 * and the hash table beside it holds slots and their keys' hashes (8 bytes a position; the key
 * compared, where the slot keeps it, only when the hash matches): a million entries are 32 MB
 * in three typed arrays that the garbage collector never walks (40 MB with the key beside the
 * slot at every position of a table under 0.7 full).
 * Open addressing with linear probing and backward-shift deletion (no tombstones); the table
 * doubles past a load of 0.7. A key that is not a canonical lower-case UUID (a secret chosen
 * by an operator, `anonymous`) goes to a small Map beside it, exactly as given.
 *
 * Slots are small dense numbers (a `RecordArena`'s), and each maps from one key at most: a key
 * set to a slot takes the slot from the key it had, as a record's new ID or secret replaces its
 * old one.
 */

const EMPTY = 0xffffffff;
const MIN_CAPACITY = 1024;

/** The value of a hex digit's char code, or -1. */
const HEX = new Int8Array(128).fill(-1);
for (let i = 0; i < 10; i++) HEX[48 + i] = i;
for (let i = 0; i < 6; i++) HEX[97 + i] = 10 + i;

/** Where the 32 hex digits of an 8-4-4-4-12 UUID sit in its 36 characters. */
const DIGITS: number[] = [];
for (let i = 0; i < 36; i++) if (i !== 8 && i !== 13 && i !== 18 && i !== 23) DIGITS.push(i);

/**
 * The four words of a canonical lower-case UUID (dashes at 8, 13, 18, 23), written to `out`;
 * false for anything else. Keys compare exactly, as strings do: an upper-case UUID is another
 * key, kept as its string (generated IDs are lower case, so that is rare).
 */
export function uuidWords(id: string, out: Uint32Array): boolean {
  if (id.length !== 36 || id.charCodeAt(8) !== 45 || id.charCodeAt(13) !== 45 || id.charCodeAt(18) !== 45 || id.charCodeAt(23) !== 45)
    return false;
  for (let w = 0; w < 4; w++) {
    let v = 0;
    for (let d = 0; d < 8; d++) {
      const c = id.charCodeAt(DIGITS[w * 8 + d] as number);
      const x = c < 128 ? (HEX[c] as number) : -1;
      if (x < 0) return false;
      v = (v << 4) | x;
    }
    out[w] = v >>> 0;
  }
  return true;
}

/**
 * The same from the 36 bytes of a UTF-8 string at `start` of `bytes` (a record's stored form),
 * so a load need not make a string of every ID.
 */
export function uuidWordsAt(bytes: Uint8Array, start: number, out: Uint32Array): boolean {
  if (
    start + 36 > bytes.length ||
    bytes[start + 8] !== 45 ||
    bytes[start + 13] !== 45 ||
    bytes[start + 18] !== 45 ||
    bytes[start + 23] !== 45
  )
    return false;
  for (let w = 0; w < 4; w++) {
    let v = 0;
    for (let d = 0; d < 8; d++) {
      const c = bytes[start + (DIGITS[w * 8 + d] as number)] as number;
      const x = c < 128 ? (HEX[c] as number) : -1;
      if (x < 0) return false;
      v = (v << 4) | x;
    }
    out[w] = v >>> 0;
  }
  return true;
}

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
  table: Uint32Array;
  hashes: Uint32Array;
}

export class IdTable {
  /** Four words of key per slot (a slot's words are stale when no position holds the slot). */
  private keys: Uint32Array = new Uint32Array(MIN_CAPACITY * 4);
  /** The slot at each position; EMPTY where there is none. */
  private table: Uint32Array;
  /**
   * The hash of the key at each position (where `table` has a slot): a probe compares it before
   * reading the key, which lies elsewhere in memory (a cache miss per position walked), and the
   * table grows and deletes without reading keys at all.
   */
  private hashes: Uint32Array;
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

  constructor(expected = 0) {
    let capacity = MIN_CAPACITY;
    while (capacity * 0.7 < expected) capacity *= 2;
    this.table = new Uint32Array(capacity).fill(EMPTY);
    this.hashes = new Uint32Array(capacity);
    this.mask = capacity - 1;
  }

  get size(): number {
    return this.used + this.other.size;
  }

  /** Bytes held by the typed arrays (what a million entries cost, without the Map of other keys). */
  get bytes(): number {
    return this.keys.byteLength + this.table.byteLength + this.hashes.byteLength;
  }

  /** The slot `id` maps to, or undefined. */
  get(id: string): number | undefined {
    const w = this.words;
    if (!uuidWords(id, w)) return this.other.get(id);
    const pos = this.find(w[0] as number, w[1] as number, w[2] as number, w[3] as number);
    return pos < 0 ? undefined : this.table[pos];
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

  /** The longest run of filled positions (what a probe may walk): for tests. */
  longestRun(): number {
    let longest = 0;
    let run = 0;
    for (let i = 0; i < this.table.length * 2; i++) {
      if (this.table[i & this.mask] === EMPTY) run = 0;
      else longest = Math.max(longest, Math.min(++run, this.table.length));
    }
    return longest;
  }

  /** Every slot held, in no particular order. */
  *values(): IterableIterator<number> {
    const table = this.table;
    for (let i = 0; i < table.length; i++) if (table[i] !== EMPTY) yield table[i] as number;
    yield* this.other.values();
  }

  /** What a checkpoint keeps: the typed arrays as they are, and the other keys. */
  dump(): IdTableDump {
    return {
      seed: this.seed,
      used: this.used,
      highest: this.highest,
      other: [...this.other],
      keys: this.keys,
      table: this.table,
      hashes: this.hashes,
    };
  }

  /** Takes the state of a dump, read back; throws when its arrays cannot be an IdTable's. */
  restore(d: IdTableDump): void {
    const n = d.table.length;
    if (
      !Number.isInteger(d.seed) ||
      n < MIN_CAPACITY ||
      (n & (n - 1)) !== 0 ||
      d.keys.length % 4 !== 0 ||
      d.keys.length / 4 <= d.highest ||
      d.hashes.length !== n ||
      d.used > n
    )
      throw new RangeError('not the arrays of an ID table');
    this.seed = d.seed >>> 0;
    this.keys = d.keys;
    this.table = d.table;
    this.hashes = d.hashes;
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
    if (keys[k] === a && keys[k + 1] === b && keys[k + 2] === c && keys[k + 3] === d && this.holds(slot)) return;
    // A slot never given words can have only a key kept as a string: no probe for its old words.
    if (slot > this.highest) {
      this.releaseNamed(slot);
      this.highest = slot;
    } else this.release(slot);
    const h = hashWords(a, b, c, d, this.seed);
    let found = this.findHashed(a, b, c, d, h);
    keys[k] = a;
    keys[k + 1] = b;
    keys[k + 2] = c;
    keys[k + 3] = d;
    if (found >= 0) {
      // The key moves from the slot it had.
      this.table[found] = slot;
      return;
    }
    if ((this.used + 1) / (this.mask + 1) > 0.7) {
      this.grow();
      found = this.findHashed(a, b, c, d, h);
    }
    // Not found: ~found is the empty position the probe ended at, where the key goes.
    this.table[~found] = slot;
    this.hashes[~found] = h;
    this.used++;
  }

  /** Whether a position holds `slot` (under the key its words say). */
  private holds(slot: number): boolean {
    const keys = this.keys;
    const k = slot * 4;
    if (k + 4 > keys.length) return false;
    const pos = this.find(keys[k] as number, keys[k + 1] as number, keys[k + 2] as number, keys[k + 3] as number);
    return pos >= 0 && this.table[pos] === slot;
  }

  /** Removes the key `slot` has, if any. */
  private release(slot: number): void {
    this.releaseNamed(slot);
    if (slot > this.highest) return;
    const keys = this.keys;
    const k = slot * 4;
    const pos = this.find(keys[k] as number, keys[k + 1] as number, keys[k + 2] as number, keys[k + 3] as number);
    if (pos >= 0 && this.table[pos] === slot) this.removeAt(pos);
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
    const { table, hashes, mask } = this;
    let pos = at;
    let next = (pos + 1) & mask;
    while (table[next] !== EMPTY) {
      const home = (hashes[next] as number) & mask;
      // The entry at `next` may fill `pos` if its home is not cyclically within (pos, next].
      if ((next > pos && (home <= pos || home > next)) || (next < pos && home <= pos && home > next)) {
        table[pos] = table[next] as number;
        hashes[pos] = hashes[next] as number;
        pos = next;
      }
      next = (next + 1) & mask;
    }
    table[pos] = EMPTY;
    this.used--;
  }

  private find(a: number, b: number, c: number, d: number): number {
    const pos = this.findHashed(a, b, c, d, hashWords(a, b, c, d, this.seed));
    return pos < 0 ? -1 : pos;
  }

  /** The position of the key (its hash `h`), or ~(the empty position its probe ended at). */
  private findHashed(a: number, b: number, c: number, d: number, h: number): number {
    const { keys, table, hashes, mask } = this;
    let pos = h & mask;
    for (;;) {
      const s = table[pos] as number;
      if (s === EMPTY) return ~pos;
      if (hashes[pos] === h) {
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
    const old = this.table;
    const oldHashes = this.hashes;
    const capacity = (this.mask + 1) * 2;
    const table = new Uint32Array(capacity).fill(EMPTY);
    const hashes = new Uint32Array(capacity);
    const mask = capacity - 1;
    // Each key placed by its stored hash: no key is read.
    for (let i = 0; i < old.length; i++) {
      const slot = old[i] as number;
      if (slot === EMPTY) continue;
      const h = oldHashes[i] as number;
      let pos = h & mask;
      while (table[pos] !== EMPTY) pos = (pos + 1) & mask;
      table[pos] = slot;
      hashes[pos] = h;
    }
    this.table = table;
    this.hashes = hashes;
    this.mask = mask;
  }
}
