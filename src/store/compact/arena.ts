/**
 * Records as their encoded bytes in a few large buffers, each found by a slot number: a
 * million records are a few dozen buffers and three typed arrays, not a million objects.
 * Buffers live outside V8's heap, so neither the garbage collector's marking nor the heap
 * limit grows with them. A replaced or freed record's bytes become garbage, counted, until
 * `compact()` copies the live ones into fresh buffers; freed slots are given out again.
 */

const CHUNK = 16 * 1024 * 1024;

/** Records' bytes as they were when captured (`RecordArena.capture`). */
export interface ArenaCapture {
  readonly length: number;
  get(i: number): Uint8Array;
}
const NONE = 0xffffffff;

/**
 * An arena as a checkpoint keeps it: its live records packed into chunks in slot order (no
 * garbage), where each slot's record is in them, and the records' bytes in that order.
 */
export interface ArenaDump {
  top: number;
  chunkOf: Uint32Array;
  offsetOf: Uint32Array;
  lengthOf: Uint32Array;
  /** Each chunk's size and the bytes of records in it. */
  chunks: Array<{ size: number; fill: number }>;
  /** The records' bytes in slot order (the chunks' contents, one after the other). */
  records(): IterableIterator<Uint8Array>;
}

export class RecordArena {
  private chunks: Buffer[] = [];
  /** Free bytes at the end of the last chunk start here. */
  private fill = 0;
  /** Per slot: its chunk, its offset there, its length (NONE as chunk: a free slot). */
  private chunkOf = new Uint32Array(1024).fill(NONE);
  private offsetOf = new Uint32Array(1024);
  private lengthOf = new Uint32Array(1024);
  /** Slots below this have been given out at least once. */
  private top = 0;
  private free: number[] = [];
  private live = 0;
  private liveBytes = 0;
  private garbage = 0;

  /** Records held. */
  get size(): number {
    return this.live;
  }

  /** Bytes of the buffers and the slot arrays: what the arena costs. */
  get bytes(): number {
    let b = this.chunkOf.byteLength + this.offsetOf.byteLength + this.lengthOf.byteLength;
    for (const c of this.chunks) b += c.byteLength;
    return b;
  }

  /** Bytes of the records held. */
  get usedBytes(): number {
    return this.liveBytes;
  }

  /** Bytes of records replaced or freed and not yet reclaimed. */
  get garbageBytes(): number {
    return this.garbage;
  }

  /**
   * Throws, naming what is wrong, unless every invariant holds: each live slot's bytes lie within
   * its chunk (the last one only up to its fill), no two live records overlap, the free slots are
   * free, below the top and listed once, and the counts of live records and their bytes agree.
   */
  verify(): void {
    let live = 0;
    let bytes = 0;
    const spans = new Map<number, Array<[number, number, number]>>();
    const free = new Set(this.free);
    if (free.size !== this.free.length) throw new Error('RecordArena: a free slot is listed twice');
    for (let slot = 0; slot < this.top; slot++) {
      const chunk = this.chunkOf[slot] as number;
      if (chunk === NONE) {
        if (!free.has(slot)) throw new Error(`RecordArena: slot ${slot} is neither live nor free`);
        continue;
      }
      if (free.has(slot)) throw new Error(`RecordArena: slot ${slot} is live and free`);
      const c = this.chunks[chunk];
      const from = this.offsetOf[slot] as number;
      const to = from + (this.lengthOf[slot] as number);
      const end = chunk === this.chunks.length - 1 ? this.fill : (c?.length ?? 0);
      if (c === undefined || to > end) throw new Error(`RecordArena: slot ${slot}'s bytes lie outside chunk ${chunk}`);
      let list = spans.get(chunk);
      if (!list) spans.set(chunk, (list = []));
      list.push([from, to, slot]);
      live++;
      bytes += to - from;
    }
    for (const s of this.free) if (s >= this.top) throw new Error(`RecordArena: free slot ${s} was never given out`);
    for (const [chunk, list] of spans) {
      list.sort((a, b) => a[0] - b[0]);
      for (let i = 1; i < list.length; i++) {
        const [, prevEnd, prev] = list[i - 1] as [number, number, number];
        const [from, , slot] = list[i] as [number, number, number];
        if (from < prevEnd) throw new Error(`RecordArena: slots ${prev} and ${slot} overlap in chunk ${chunk}`);
      }
    }
    if (live !== this.live) throw new Error(`RecordArena: ${live} live slots, but the count says ${this.live}`);
    if (bytes !== this.liveBytes) throw new Error(`RecordArena: ${bytes} live bytes, but the count says ${this.liveBytes}`);
  }

  /** Stores a copy of `bytes`; answers its slot. */
  add(bytes: Uint8Array): number {
    const slot = this.free.length > 0 ? (this.free.pop() as number) : this.newSlot();
    this.place(slot, bytes);
    this.live++;
    return slot;
  }

  /** The record in `slot` becomes `bytes` (its old bytes are garbage). */
  replace(slot: number, bytes: Uint8Array): void {
    this.check(slot);
    this.garbage += this.lengthOf[slot] as number;
    this.liveBytes -= this.lengthOf[slot] as number;
    this.place(slot, bytes);
  }

  /** Frees `slot`: its bytes are garbage, and the slot is given out again. */
  delete(slot: number): void {
    this.check(slot);
    this.garbage += this.lengthOf[slot] as number;
    this.liveBytes -= this.lengthOf[slot] as number;
    this.chunkOf[slot] = NONE;
    this.free.push(slot);
    this.live--;
  }

  /** The slots holding records, in slot order (about the order the records came in). */
  *slots(): IterableIterator<number> {
    for (let slot = 0; slot < this.top; slot++) if (this.chunkOf[slot] !== NONE) yield slot;
  }

  /** The same in one typed array. */
  liveSlots(): Uint32Array {
    const out = new Uint32Array(this.live);
    let n = 0;
    for (let slot = 0; slot < this.top; slot++) if (this.chunkOf[slot] !== NONE) out[n++] = slot;
    return out;
  }

  has(slot: number): boolean {
    return slot >= 0 && slot < this.top && this.chunkOf[slot] !== NONE;
  }

  /** The bytes of the record in `slot`: a view into the arena, valid until the next `compact()`. */
  get(slot: number): Uint8Array {
    this.check(slot);
    const offset = this.offsetOf[slot] as number;
    return (this.chunks[this.chunkOf[slot] as number] as Buffer).subarray(offset, offset + (this.lengthOf[slot] as number));
  }

  /**
   * Where the records of `slots` are now, kept as they are: a record replaced or deleted later
   * gets new bytes elsewhere (or none), and a compaction makes new buffers, so what is captured
   * stays readable, unchanged, for as long as the capture is held.
   */
  capture(slots: Uint32Array): ArenaCapture {
    const n = slots.length;
    const chunkOf = new Uint32Array(n);
    const offsetOf = new Uint32Array(n);
    const lengthOf = new Uint32Array(n);
    for (let i = 0; i < n; i++) {
      const s = slots[i] as number;
      this.check(s);
      chunkOf[i] = this.chunkOf[s] as number;
      offsetOf[i] = this.offsetOf[s] as number;
      lengthOf[i] = this.lengthOf[s] as number;
    }
    const chunks = [...this.chunks];
    return {
      length: n,
      get: (i) => {
        const offset = offsetOf[i] as number;
        return (chunks[chunkOf[i] as number] as Buffer).subarray(offset, offset + (lengthOf[i] as number));
      },
    };
  }

  /** Copies every live record into fresh buffers (slots stay as they are); drops the garbage. */
  compact(): void {
    const old = this.chunks;
    this.chunks = [];
    this.fill = 0;
    this.garbage = 0;
    this.liveBytes = 0;
    for (let slot = 0; slot < this.top; slot++) {
      const chunk = this.chunkOf[slot] as number;
      if (chunk === NONE) continue;
      const offset = this.offsetOf[slot] as number;
      this.place(slot, (old[chunk] as Buffer).subarray(offset, offset + (this.lengthOf[slot] as number)));
    }
  }

  /** What a checkpoint keeps (see ArenaDump); the arena must not change while it is written. */
  dump(): ArenaDump {
    const top = this.top;
    const chunkOf = new Uint32Array(top).fill(NONE);
    const offsetOf = new Uint32Array(top);
    const lengthOf = new Uint32Array(top);
    const chunks: Array<{ size: number; fill: number }> = [];
    let last: { size: number; fill: number } | undefined;
    // The layout `compact()` would make, computed without copying.
    for (let slot = 0; slot < top; slot++) {
      if (this.chunkOf[slot] === NONE) continue;
      const n = this.lengthOf[slot] as number;
      if (last === undefined || last.fill + n > last.size) chunks.push((last = { size: Math.max(CHUNK, n), fill: 0 }));
      chunkOf[slot] = chunks.length - 1;
      offsetOf[slot] = last.fill;
      lengthOf[slot] = n;
      last.fill += n;
    }
    const self = this;
    return {
      top,
      chunkOf,
      offsetOf,
      lengthOf,
      chunks,
      *records() {
        for (const slot of self.slots()) yield self.get(slot);
      },
    };
  }

  /**
   * Takes the state of a dump, read back: `chunks` hold what the dump's chunks held (each of at
   * least its size). Throws when a slot's record is not within its chunk (a damaged dump).
   */
  restore(d: Omit<ArenaDump, 'records' | 'chunks'> & { chunks: Buffer[]; fills: number[] }): void {
    const { top } = d;
    if (d.chunkOf.length !== top || d.offsetOf.length !== top || d.lengthOf.length !== top)
      throw new RangeError('slot arrays of another length');
    d.chunks.forEach((c, i) => {
      if (c.length < (d.fills[i] ?? Number.POSITIVE_INFINITY)) throw new RangeError(`chunk ${i} is smaller than its records`);
    });
    let capacity = 1024;
    while (capacity < top) capacity *= 2;
    const chunkOf = new Uint32Array(capacity).fill(NONE);
    const offsetOf = new Uint32Array(capacity);
    const lengthOf = new Uint32Array(capacity);
    chunkOf.set(d.chunkOf);
    offsetOf.set(d.offsetOf);
    lengthOf.set(d.lengthOf);
    const free: number[] = [];
    let live = 0;
    let liveBytes = 0;
    for (let slot = top - 1; slot >= 0; slot--) {
      const c = chunkOf[slot] as number;
      if (c === NONE) {
        free.push(slot);
        continue;
      }
      const end = (offsetOf[slot] as number) + (lengthOf[slot] as number);
      if (c >= d.chunks.length || end > (d.fills[c] as number)) throw new RangeError(`slot ${slot} is outside its chunk`);
      live++;
      liveBytes += lengthOf[slot] as number;
    }
    Object.assign(this, {
      chunks: d.chunks,
      fill: d.fills[d.fills.length - 1] ?? 0,
      chunkOf,
      offsetOf,
      lengthOf,
      top,
      free,
      live,
      liveBytes,
      garbage: 0,
    });
  }

  private check(slot: number): void {
    if (!this.has(slot)) throw new RangeError(`no record in slot ${slot}`);
  }

  private newSlot(): number {
    const slot = this.top++;
    if (slot >= this.chunkOf.length) {
      const grow = <T extends Uint32Array>(a: T, fill?: number): T => {
        const b = new Uint32Array(a.length * 2) as T;
        if (fill !== undefined) b.fill(fill, a.length);
        b.set(a);
        return b;
      };
      this.chunkOf = grow(this.chunkOf, NONE);
      this.offsetOf = grow(this.offsetOf);
      this.lengthOf = grow(this.lengthOf);
    }
    return slot;
  }

  private place(slot: number, bytes: Uint8Array): void {
    const n = bytes.length;
    let last = this.chunks[this.chunks.length - 1];
    if (last === undefined || this.fill + n > last.length) {
      // A record larger than a chunk gets a buffer of its own size.
      last = Buffer.allocUnsafeSlow(Math.max(CHUNK, n));
      this.chunks.push(last);
      this.fill = 0;
    }
    last.set(bytes, this.fill);
    this.chunkOf[slot] = this.chunks.length - 1;
    this.offsetOf[slot] = this.fill;
    this.lengthOf[slot] = n;
    this.fill += n;
    this.liveBytes += n;
  }
}
