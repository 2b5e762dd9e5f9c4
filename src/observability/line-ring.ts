/**
 * The last lines of a log, numbered from 1, kept as UTF-8 bytes in one buffer with their
 * offsets and times in typed arrays: no heap object per kept line, so a busy log adds
 * nothing for the garbage collector to copy or mark. Lines are dropped oldest first, when
 * more than `slots` are kept or when a new line needs their bytes.
 */
export class LineRing {
  private readonly buf: Buffer;
  private readonly offsets: Float64Array;
  private readonly lengths: Int32Array;
  private readonly times: Float64Array;
  /** A number the owner gives each line (its place in an order several rings share). */
  private readonly tags: Float64Array;
  /** Where the next line's bytes go. */
  private head = 0;
  private newest = 0;
  private oldestKept = 1;

  constructor(
    private readonly slots: number,
    bytes: number,
  ) {
    this.buf = Buffer.alloc(bytes);
    this.offsets = new Float64Array(slots);
    this.lengths = new Int32Array(slots);
    this.times = new Float64Array(slots);
    this.tags = new Float64Array(slots);
  }

  /**
   * Keeps `line` (a line longer than a quarter of the buffer is kept as `stub`), with `tag`
   * (default: its number), and returns its number.
   */
  push(line: string, at: number, stub: () => string, tag?: number): number {
    let text = line;
    let n = Buffer.byteLength(text);
    if (n > this.buf.length / 4) {
      text = stub();
      n = Math.min(Buffer.byteLength(text), this.buf.length / 4);
    }
    const seq = ++this.newest;
    if (this.head + n > this.buf.length) {
      // Wrapping round: the older lines still in the tail go first (they are the oldest kept).
      while (this.oldestKept < seq && this.offsetOf(this.oldestKept) >= this.head) this.oldestKept++;
      this.head = 0;
    }
    const from = this.head;
    const to = from + n;
    while (this.oldestKept < seq && this.offsetOf(this.oldestKept) < to && this.offsetOf(this.oldestKept) >= from) this.oldestKept++;
    this.oldestKept = Math.max(this.oldestKept, seq - this.slots + 1);
    const slot = seq % this.slots;
    this.buf.write(text, from, n, 'utf8');
    this.offsets[slot] = from;
    this.lengths[slot] = n;
    this.times[slot] = at;
    this.tags[slot] = tag ?? seq;
    this.head = to;
    return seq;
  }

  private offsetOf(seq: number): number {
    return this.offsets[seq % this.slots] as number;
  }

  /** The oldest line still kept (newest + 1 when none is). */
  oldest(): number {
    return Math.min(this.oldestKept, this.newest + 1);
  }

  /** The newest line's number (0 before any). */
  latest(): number {
    return this.newest;
  }

  /** When line `seq` was kept (ms since the epoch); `seq` must be kept. */
  timeOf(seq: number): number {
    return this.times[seq % this.slots] as number;
  }

  /** The tag line `seq` was kept with; `seq` must be kept. */
  tagOf(seq: number): number {
    return this.tags[seq % this.slots] as number;
  }

  /** Line `seq` as text; `seq` must be kept. */
  lineOf(seq: number): string {
    const slot = seq % this.slots;
    const from = this.offsets[slot] as number;
    return this.buf.toString('utf8', from, from + (this.lengths[slot] as number));
  }
}
