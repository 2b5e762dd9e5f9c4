/**
 * A set of slot numbers in one typed array: what a non-unique index holds under one key (the
 * tokens of a namespace, of a policy, of a service). A million members are 6-12 MB that the
 * garbage collector never walks, where a Set of them is a large object it marks on every cycle.
 * Open addressing with linear probing and backward-shift deletion; it doubles past a load of
 * 0.7 and halves below 0.15, so a set that empties gives its memory back.
 */

const EMPTY = 0xffffffff;
const MIN_CAPACITY = 4;

export class SlotSet {
  private cells: Uint32Array;
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
    return this.cells.byteLength;
  }

  has(slot: number): boolean {
    for (let i = hash(slot) & this.mask; ; i = (i + 1) & this.mask) {
      const c = this.cells[i] as number;
      if (c === slot) return true;
      if (c === EMPTY) return false;
    }
  }

  add(slot: number): void {
    if (slot === EMPTY) throw new RangeError('slot out of range');
    if ((this.count + 1) * 10 > this.cells.length * 7) this.resize(this.cells.length * 2);
    for (let i = hash(slot) & this.mask; ; i = (i + 1) & this.mask) {
      const c = this.cells[i] as number;
      if (c === slot) return;
      if (c === EMPTY) {
        this.cells[i] = slot;
        this.count++;
        return;
      }
    }
  }

  delete(slot: number): boolean {
    let i = hash(slot) & this.mask;
    for (; ; i = (i + 1) & this.mask) {
      const c = this.cells[i] as number;
      if (c === EMPTY) return false;
      if (c === slot) break;
    }
    // Backward shift: move each later entry of the run into the hole when its home allows it.
    let hole = i;
    for (let j = (i + 1) & this.mask; ; j = (j + 1) & this.mask) {
      const c = this.cells[j] as number;
      if (c === EMPTY) break;
      const home = hash(c) & this.mask;
      // Movable when its home is not in (hole, j] cyclically.
      if (hole <= j ? home <= hole || home > j : home <= hole && home > j) {
        this.cells[hole] = c;
        hole = j;
      }
    }
    this.cells[hole] = EMPTY;
    this.count--;
    if (this.cells.length > MIN_CAPACITY && this.count * 100 < this.cells.length * 15) this.resize(this.cells.length / 2);
    return true;
  }

  /** The members, copied first: the set may change while they are used. */
  toArray(): Uint32Array {
    const out = new Uint32Array(this.count);
    let n = 0;
    for (const c of this.cells) if (c !== EMPTY) out[n++] = c;
    return out;
  }

  private resize(capacity: number): void {
    const old = this.cells;
    this.cells = new Uint32Array(capacity).fill(EMPTY);
    this.mask = capacity - 1;
    for (const c of old) {
      if (c === EMPTY) continue;
      let i = hash(c) & this.mask;
      while (this.cells[i] !== EMPTY) i = (i + 1) & this.mask;
      this.cells[i] = c;
    }
  }
}

/** Slots are dense small integers: mixed so that runs of them do not cluster. */
function hash(slot: number): number {
  return Math.imul(slot, 0x9e3779b1) >>> 0;
}
