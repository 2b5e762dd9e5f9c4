import { SlotSet } from './slot-set.js';

/**
 * A compact table's ordered index (the tokens' expiry): the times held, in order, and the slots
 * at each. A time whose last slot went stays in the sorted array (stale, skipped by readers)
 * until stale ones are half of it: the reaper empties the earliest times one after another, and
 * taking each out of the front of a sorted array moved the whole array every time.
 */
export class TimeOrder {
  /** The slots at each time (a checkpoint dumps and restores these). */
  readonly atTime = new Map<number, SlotSet>();
  private times: number[] = [];
  private stale = 0;

  /** `loading`: at a start, sorted once by finishLoading. */
  add(time: number, slot: number, loading: boolean): void {
    let set = this.atTime.get(time);
    if (set === undefined) {
      this.atTime.set(time, (set = new SlotSet()));
      if (loading) this.times.push(time);
      else {
        const at = this.position(time);
        // Held already as a stale time: live again.
        if (this.times[at] === time) this.stale--;
        else this.times.splice(at, 0, time);
      }
    }
    set.add(slot);
  }

  /** Takes `slot` out of `time`; false when it was not held there. */
  delete(time: number, slot: number): boolean {
    const set = this.atTime.get(time);
    if (!set?.delete(slot)) return false;
    if (set.size > 0) return true;
    this.atTime.delete(time);
    if (++this.stale > 1024 && this.stale * 2 > this.times.length) {
      this.times = this.times.filter((t) => this.atTime.has(t));
      this.stale = 0;
    }
    return true;
  }

  has(time: number, slot: number): boolean {
    return this.atTime.get(time)?.has(slot) ?? false;
  }

  /** After a load (`add` with `loading`) or a checkpoint's restore of `atTime`: the times in order. */
  finishLoading(): void {
    this.times = [...this.atTime.keys()].sort((a, b) => a - b);
    this.stale = 0;
  }

  /** Each time from `from` (inclusive; the first when absent) up to `until`, with its slots, in order. */
  *upTo(until: number, from?: number): IterableIterator<[number, SlotSet]> {
    for (let i = from === undefined ? 0 : this.position(from); i < this.times.length; i++) {
      const time = this.times[i] as number;
      if (time > until) return;
      const at = this.atTime.get(time);
      if (at !== undefined) yield [time, at];
    }
  }

  first(): number | undefined {
    for (const t of this.times) if (this.atTime.has(t)) return t;
    return undefined;
  }

  /** Throws unless the slots held are `timed` in all and the times are held in order; `name` names the table. */
  verify(name: string, timed: number): void {
    let held = 0;
    for (const set of this.atTime.values()) {
      set.verify();
      held += set.size;
    }
    if (held !== timed) throw new Error(`${name}: the time order holds slots no record accounts for`);
    if (
      this.times.length !== this.atTime.size + this.stale ||
      this.times.some((t, i) => i > 0 && (this.times[i - 1] as number) >= t) ||
      [...this.atTime.keys()].some((t) => this.times[this.position(t)] !== t)
    )
      throw new Error(`${name}: the time order is not the sorted times held`);
  }

  /** First position in `times` not before `time`. */
  private position(time: number): number {
    let lo = 0;
    let hi = this.times.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((this.times[mid] as number) < time) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
