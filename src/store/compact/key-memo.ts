/** How many distinct values of one field a load numbers; past that the field is not numbered. */
const LIMIT = 4096;
const SLOTS = LIMIT * 2;
/** A memo's key is its fields' numbers, each below this: four of them still make an exact number. */
const BASE = LIMIT + 1;
const MAX_FIELDS = 4;
/** How many sets of values a memo keeps before it starts again. */
const MAX_KNOWN = 65536;
/** Keys below this are kept in an array. */
const SMALL = 65536;

/**
 * The values of a few fields of the records a load reads, numbered by their raw bytes: the
 * same namespace, list of links or auth method record after record gets the same number, found
 * by a hash of its bytes and a comparison, nothing decoded. A field whose values differ record
 * by record (a creation time) stops being numbered once it has `LIMIT` of them.
 */
export class ValueNumbers {
  private readonly tables: FieldValues[];

  constructor(fields: number) {
    this.tables = Array.from({ length: fields }, () => new FieldValues());
  }

  /** The number of field `f`'s value at [start, end) of `bytes`: 0 when absent (start -1), -1 when the field is not numbered. */
  of(f: number, bytes: Uint8Array, start: number, end: number): number {
    return start === -1 ? 0 : (this.tables[f] as FieldValues).of(bytes, start, end);
  }

  clear(): void {
    for (const t of this.tables) t.clear();
  }
}

class FieldValues {
  /** Hash slots: a value's number, 0 when empty. */
  private slots = new Int32Array(SLOTS);
  private hashes: number[] = [];
  private starts: number[] = [];
  private pool = new Uint8Array(4096);
  private used = 0;
  private full = false;
  /** The number of each value of one byte met, by that byte (0: not met). */
  private single = new Int32Array(256);

  of(bytes: Uint8Array, start: number, end: number): number {
    if (this.full) return -1;
    const n = end - start;
    // A value of one byte (false, an empty list or string) by that byte: no hash, no comparison.
    if (n === 1) {
      const b = bytes[start] as number;
      const known = this.single[b] as number;
      if (known !== 0) return known;
    }
    let h = 0x811c9dc5 ^ n;
    for (let j = start; j < end; j++) h = Math.imul(h ^ (bytes[j] as number), 0x01000193);
    h >>>= 0;
    const { slots, hashes, starts, pool } = this;
    const mask = SLOTS - 1;
    let at = h & mask;
    for (let id = slots[at] as number; id !== 0; id = slots[(at = (at + 1) & mask)] as number) {
      if (hashes[id - 1] !== h) continue;
      const from = starts[id - 1] as number;
      if ((starts[id] ?? this.used) - from !== n) continue;
      let j = 0;
      while (j < n && pool[from + j] === bytes[start + j]) j++;
      if (j === n) return id;
    }
    if (hashes.length >= LIMIT) {
      this.clear();
      this.full = true;
      return -1;
    }
    if (this.used + n > pool.length) {
      const grown = new Uint8Array(Math.max(pool.length * 2, this.used + n));
      grown.set(pool.subarray(0, this.used));
      this.pool = grown;
    }
    this.pool.set(bytes.subarray(start, end), this.used);
    starts.push(this.used);
    this.used += n;
    hashes.push(h);
    slots[at] = hashes.length;
    if (n === 1) this.single[bytes[start] as number] = hashes.length;
    return hashes.length;
  }

  clear(): void {
    this.slots.fill(0);
    this.hashes = [];
    this.starts = [];
    this.used = 0;
    this.full = false;
    this.single.fill(0);
  }
}

/**
 * What a load computed for one non-unique index, remembered by the numbers of the values the
 * index reads: a record whose values were met before takes the same slot sets, without its keys
 * built or looked up. Undefined when a value is not numbered (or the index reads too many fields).
 */
export class KeyMemo<T> {
  /** By key: the small keys (most: an index of one field has one key per value) in an array, the others in a map. */
  private small: Array<T | undefined> = [];
  private readonly known = new Map<number, T>();

  /** `fields`: which of the numbered fields the index reads. */
  constructor(readonly fields: Int32Array) {}

  /** The key of the values numbered `numbers[fields[i]]`; -1 when one is not numbered. */
  keyOf(numbers: Int32Array): number {
    const fields = this.fields;
    if (fields.length > MAX_FIELDS) return -1;
    let key = 0;
    for (let i = 0; i < fields.length; i++) {
      const n = numbers[fields[i] as number] as number;
      if (n < 0) return -1;
      key = key * BASE + n;
    }
    return key;
  }

  get(key: number): T | undefined {
    if (key < SMALL) return key < 0 ? undefined : this.small[key];
    return this.known.get(key);
  }

  set(key: number, value: T): void {
    if (key < 0) return;
    if (key < SMALL) {
      while (this.small.length <= key) this.small.push(undefined);
      this.small[key] = value;
      return;
    }
    if (this.known.size >= MAX_KNOWN) this.known.clear();
    this.known.set(key, value);
  }

  clear(): void {
    this.small = [];
    this.known.clear();
  }
}
