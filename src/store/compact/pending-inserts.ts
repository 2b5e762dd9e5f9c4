/**
 * Inserts an `IdTable` defers while it fills from empty: (slot, hash) pairs noted in arrival
 * order, given back in the order of their home positions so that placing them walks the table
 * front to back instead of missing the cache at every insert.
 */
export class PendingInserts {
  /** Slot and hash side by side, `count` pairs. */
  private pairs: Uint32Array;
  count = 0;

  constructor(expected = 1024) {
    this.pairs = new Uint32Array(Math.max(1, expected) * 2);
  }

  /** Room for `expected` pairs at once, when none is noted yet. */
  reserve(expected: number): void {
    if (this.count === 0 && this.pairs.length < expected * 2) this.pairs = new Uint32Array(expected * 2);
  }

  note(slot: number, hash: number): void {
    if (this.count * 2 === this.pairs.length) {
      const wider = new Uint32Array(this.pairs.length * 2);
      wider.set(this.pairs);
      this.pairs = wider;
    }
    this.pairs[this.count * 2] = slot;
    this.pairs[this.count * 2 + 1] = hash;
    this.count++;
  }

  /**
   * The pairs sorted by home (`hash & mask`), as far as its top bits above `spanBits`: each
   * bucket's homes lie within 2^spanBits positions, which a core's cache holds. The sort is a
   * stable counting sort, so a key noted twice keeps its two slots in the order they came.
   */
  byHome(mask: number, spanBits: number): Uint32Array {
    const { pairs, count } = this;
    const bits = 31 - Math.clz32(mask + 1);
    const shift = Math.min(bits, spanBits);
    const starts = new Uint32Array((1 << (bits - shift)) + 1);
    for (let i = 0; i < count; i++) (starts[(((pairs[i * 2 + 1] as number) & mask) >>> shift) + 1] as number)++;
    for (let b = 1; b < starts.length; b++) starts[b] = (starts[b] as number) + (starts[b - 1] as number);
    const sorted = new Uint32Array(count * 2);
    for (let i = 0; i < count; i++) {
      const hash = pairs[i * 2 + 1] as number;
      const at = (starts[(hash & mask) >>> shift] as number)++ * 2;
      sorted[at] = pairs[i * 2] as number;
      sorted[at + 1] = hash;
    }
    return sorted;
  }
}
