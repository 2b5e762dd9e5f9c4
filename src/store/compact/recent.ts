/**
 * Decoded records by slot, the recently used kept: two generations, each up to half the size.
 * New and used records go to the young one; when it is full it becomes the old one and the old
 * one is dropped, so a record used in each half-period stays (the same object). Constant time,
 * where a least-recently-used Map's eviction walks the holes deletes leave at its front.
 */
export class Recent<R> {
  private young = new Map<number, R>();
  private old = new Map<number, R>();

  constructor(private readonly half: number) {}

  get(slot: number): R | undefined {
    return this.young.get(slot) ?? this.old.get(slot);
  }

  /** The record, counted as used. */
  use(slot: number): R | undefined {
    const r = this.young.get(slot);
    if (r !== undefined) return r;
    const o = this.old.get(slot);
    if (o !== undefined) this.set(slot, o);
    return o;
  }

  set(slot: number, record: R): void {
    this.old.delete(slot);
    this.young.set(slot, record);
    if (this.young.size >= this.half) {
      this.old = this.young;
      this.young = new Map();
    }
  }

  delete(slot: number): void {
    this.young.delete(slot);
    this.old.delete(slot);
  }
}
