/**
 * A set of slot numbers in one typed array: what a non-unique index holds under one key (the
 * tokens of a namespace, of a policy, of a service). A million members are a few megabytes
 * that the garbage collector never walks, where a Set of them is a large object it marks on
 * every cycle.
 *
 * Two forms, whichever is smaller: a hash set (open addressing, linear probing, backward-shift
 * deletion; it doubles past a load of 0.7 and halves below 0.15, so a set that empties gives
 * its memory back), or a bitmap of the slots below the highest member, for a set holding a
 * good part of all the slots (a namespace's tokens: 128 KB for a million where the hash set
 * is 8 MB, and adding a member touches one word, not a random cell of megabytes).
 */

const EMPTY = 0xffffffff;
const MIN_CAPACITY = 4;

export class SlotSet {
  /** The hash form's cells (EMPTY: none); undefined in the bitmap form. */
  private cells: Uint32Array | undefined;
  /** The bitmap form's words (bit s of word s >> 5: slot s is a member); undefined in the hash form. */
  private bits: Uint32Array | undefined;
  private mask: number;
  private count = 0;

  constructor() {
    this.cells = new Uint32Array(MIN_CAPACITY).fill(EMPTY);
    this.mask = MIN_CAPACITY - 1;
  }

  get size(): number {
    return this.count;
  }

  get bytes(): number {
    return (this.cells ?? this.bits)?.byteLength ?? 0;
  }

  /**
   * Throws, naming what is wrong, unless every invariant holds: exactly one form; the count is
   * the members held; in the hash form each member is reached from its home by a probe that
   * meets no empty cell first, none held twice, the load below 0.7.
   */
  verify(): void {
    if ((this.cells === undefined) === (this.bits === undefined)) throw new Error('SlotSet: not exactly one of its two forms');
    let n = 0;
    if (this.bits !== undefined) {
      for (const w of this.bits) for (let x = w; x !== 0; x &= x - 1) n++;
    } else {
      const cells = this.cells as Uint32Array;
      if (cells.length !== this.mask + 1) throw new Error('SlotSet: its mask does not fit its cells');
      const seen = new Set<number>();
      for (let i = 0; i < cells.length; i++) {
        const c = cells[i] as number;
        if (c === EMPTY) continue;
        n++;
        if (seen.has(c)) throw new Error(`SlotSet: slot ${c} is held twice`);
        seen.add(c);
        for (let at = hash(c) & this.mask; at !== i; at = (at + 1) & this.mask)
          if (cells[at] === EMPTY) throw new Error(`SlotSet: slot ${c} sits past an empty cell of its probe run`);
      }
      if (n * 10 > cells.length * 7) throw new Error(`SlotSet: ${n} members in ${cells.length} cells, over the 0.7 load`);
    }
    if (n !== this.count) throw new Error(`SlotSet: ${n} members held, but the count says ${this.count}`);
  }

  has(slot: number): boolean {
    const bits = this.bits;
    if (bits !== undefined) return slot >>> 5 < bits.length && ((bits[slot >>> 5] as number) & (1 << (slot & 31))) !== 0;
    const cells = this.cells as Uint32Array;
    for (let i = hash(slot) & this.mask; ; i = (i + 1) & this.mask) {
      const c = cells[i] as number;
      if (c === slot) return true;
      if (c === EMPTY) return false;
    }
  }

  add(slot: number): void {
    if (!(slot >= 0 && slot < EMPTY)) throw new RangeError('slot out of range');
    if (this.bits !== undefined) {
      if (slot >>> 5 >= this.bits.length) {
        // A bitmap to this slot would be larger than the hash set of the members: back to that.
        if (bitmapBytes(slot) > hashBytes(this.count + 1) * 4) this.toHash();
        else this.widen(slot);
      }
      if (this.bits !== undefined) {
        const word = slot >>> 5;
        const bit = 1 << (slot & 31);
        if (((this.bits[word] as number) & bit) === 0) {
          this.bits[word] = (this.bits[word] as number) | bit;
          this.count++;
        }
        return;
      }
    }
    const capacity = (this.cells as Uint32Array).length;
    if ((this.count + 1) * 10 > capacity * 7) {
      // The set outgrows its hash form: a bitmap when that is smaller.
      const highest = Math.max(slot, maxOf(this.cells as Uint32Array));
      if (bitmapBytes(highest) <= capacity * 2 * 4) {
        this.toBits(highest);
        this.add(slot);
        return;
      }
      this.rehash(this.cells as Uint32Array, capacity * 2);
    }
    const cells = this.cells as Uint32Array;
    for (let i = hash(slot) & this.mask; ; i = (i + 1) & this.mask) {
      const c = cells[i] as number;
      if (c === slot) return;
      if (c === EMPTY) {
        cells[i] = slot;
        this.count++;
        return;
      }
    }
  }

  delete(slot: number): boolean {
    const bits = this.bits;
    if (bits !== undefined) {
      const word = slot >>> 5;
      const bit = 1 << (slot & 31);
      if (word >= bits.length || ((bits[word] as number) & bit) === 0) return false;
      bits[word] = (bits[word] as number) & ~bit;
      this.count--;
      // Few members left in a wide bitmap: the hash form is smaller by far.
      if (hashBytes(this.count) * 4 < bits.byteLength) this.toHash();
      return true;
    }
    const cells = this.cells as Uint32Array;
    let i = hash(slot) & this.mask;
    for (; ; i = (i + 1) & this.mask) {
      const c = cells[i] as number;
      if (c === EMPTY) return false;
      if (c === slot) break;
    }
    // Backward shift: move each later entry of the run into the hole when its home allows it.
    let hole = i;
    for (let j = (i + 1) & this.mask; ; j = (j + 1) & this.mask) {
      const c = cells[j] as number;
      if (c === EMPTY) break;
      const home = hash(c) & this.mask;
      // Movable when its home is not in (hole, j] cyclically.
      if (hole <= j ? home <= hole || home > j : home <= hole && home > j) {
        cells[hole] = c;
        hole = j;
      }
    }
    cells[hole] = EMPTY;
    this.count--;
    if (cells.length > MIN_CAPACITY && this.count * 100 < cells.length * 15) this.rehash(cells, cells.length / 2);
    return true;
  }

  /** The members, copied first: the set may change while they are used. */
  toArray(): Uint32Array {
    const out = new Uint32Array(this.count);
    let n = 0;
    const bits = this.bits;
    if (bits !== undefined) {
      for (let w = 0; w < bits.length; w++) {
        let word = bits[w] as number;
        while (word !== 0) {
          const low = word & -word;
          out[n++] = w * 32 + (31 - Math.clz32(low));
          word ^= low;
        }
      }
      return out;
    }
    for (const c of this.cells as Uint32Array) if (c !== EMPTY) out[n++] = c;
    return out;
  }

  /** The hash form's members as a bitmap with room up to slot `highest`. */
  private toBits(highest: number): void {
    const cells = this.cells as Uint32Array;
    const bits = new Uint32Array(bitmapBytes(highest) / 4);
    for (let i = 0; i < cells.length; i++) {
      const s = cells[i] as number;
      if (s !== EMPTY) bits[s >>> 5] = (bits[s >>> 5] as number) | (1 << (s & 31));
    }
    this.cells = undefined;
    this.bits = bits;
  }

  private toHash(): void {
    const members = this.toArray();
    this.bits = undefined;
    let capacity = MIN_CAPACITY;
    while ((members.length + 1) * 10 > capacity * 7) capacity *= 2;
    this.rehash(members, capacity);
  }

  /** Room in the bitmap for `slot`: it doubles (slots are given out in order, mostly). */
  private widen(slot: number): void {
    const old = this.bits as Uint32Array;
    let words = old.length;
    while (words <= slot >>> 5) words *= 2;
    this.bits = new Uint32Array(words);
    this.bits.set(old);
  }

  /** The hash form at `capacity` cells holding `members` (EMPTY entries skipped). */
  private rehash(members: Uint32Array, capacity: number): void {
    const cells = new Uint32Array(capacity).fill(EMPTY);
    const mask = capacity - 1;
    for (let m = 0; m < members.length; m++) {
      const c = members[m] as number;
      if (c === EMPTY) continue;
      let i = hash(c) & mask;
      while (cells[i] !== EMPTY) i = (i + 1) & mask;
      cells[i] = c;
    }
    this.mask = mask;
    this.cells = cells;
  }
}

/** The highest slot among `cells` (EMPTY entries skipped); 0 for none. */
function maxOf(cells: Uint32Array): number {
  let max = 0;
  for (let i = 0; i < cells.length; i++) {
    const s = cells[i] as number;
    if (s !== EMPTY && s > max) max = s;
  }
  return max;
}

/** Bytes of a bitmap holding slots up to `slot`, a whole number of 32-bit words (at least one). */
function bitmapBytes(slot: number): number {
  return ((slot >>> 5) + 1) * 4;
}

/** Bytes of the hash form for `count` members. */
function hashBytes(count: number): number {
  let capacity = MIN_CAPACITY;
  while (count * 10 > capacity * 7) capacity *= 2;
  return capacity * 4;
}

/** Slots are dense small integers: mixed so that runs of them do not cluster. */
function hash(slot: number): number {
  return Math.imul(slot, 0x9e3779b1) >>> 0;
}
