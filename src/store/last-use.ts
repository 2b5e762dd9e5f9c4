import { z } from 'zod';
import { createdHour } from './schema.js';

/**
 * The last use of each token this server knows of (docs/http-api.md, "Last use"): when its secret last
 * authenticated a request here, was reported by another server of its scope, or was read back
 * from the disk. Recording a use is a map look-up and, at most once a second per token, a set:
 * never a write. What changed since the last flush is kept apart, for the leader to write in one
 * batch (`LevelStore.flushLastUses`), a follower to report to its leader, and a secondary to
 * report (its global tokens) to the primary.
 *
 * Times are milliseconds, as precise as the servers saw them: the idle reaper judges from these,
 * not from the minute a view shows.
 */
/** How far past this server's clock a peer's reported use may be (servers' clocks differ a little). */
export const PEER_SKEW_MS = 60_000;

/** The hour a use falls in (ms since the epoch, whole hours): what the inventory counts uses by. */
export const HOUR_MS = 3_600_000;
const hourOf = (ms: number): number => Math.floor(ms / HOUR_MS);

export class LastUseBook {
  /** Accessor → the latest use known (flushed or not). */
  private readonly at = new Map<string, number>();
  /** Uses not yet written to the disk (the leader) or reported to the leader (a follower). */
  private readonly unflushed = new Set<string>();
  /** How many tokens were last used in each hour (the inventory's "unused for 30 days", counted, not walked). */
  private readonly byHour = new Map<number, number>();
  /**
   * How many tokens both held and used were made in each hour since `madeFrom` (their `created`
   * index keys): counted once when the inventory first asks (`usedByHourMade`), then kept by every
   * change of either (a first use, a use forgotten, a token made or deleted: `tokenMade`).
   */
  private made: Map<string, number> | undefined;
  private madeFrom = '';
  /** The hour a token held was made, as its `created` index key (undefined: not held): set by the state the book belongs to. */
  madeHourOf: ((accessor: string) => string | undefined) | undefined;

  /** Sets a token's last use, keeping the count of each hour. */
  private put(accessor: string, ms: number, prev: number | undefined): void {
    if (prev !== undefined) this.count(hourOf(prev), -1);
    else if (this.made !== undefined) this.countMade(this.madeHourOf?.(accessor), 1);
    this.at.set(accessor, ms);
    this.count(hourOf(ms), 1);
  }

  private countMade(hour: string | undefined, by: number): void {
    const made = this.made;
    if (made === undefined || hour === undefined || hour < this.madeFrom) return;
    const n = (made.get(hour) ?? 0) + by;
    if (n === 0) made.delete(hour);
    else made.set(hour, n);
  }

  /**
   * A token written, by its CreateTime before and after (undefined: not held before, or deleted):
   * one made, deleted or given another CreateTime is counted again by its hour made if it has a
   * use. Called when the tables change, before a deleted token's use is forgotten.
   */
  tokenMade(accessor: string, before: string | undefined, after: string | undefined): void {
    if (this.made === undefined || before === after || !this.at.has(accessor)) return;
    this.countMade(before === undefined ? undefined : createdHour(before), -1);
    this.countMade(after === undefined ? undefined : createdHour(after), 1);
  }

  /**
   * The tokens held and used, by the hour they were made, for the hours from `from` (a `created`
   * key): the first ask counts them in `made` (each hour's token IDs since `from`, looked up here);
   * from then on they are kept, not walked. `from` may only move forward between asks (a window's start).
   */
  usedByHourMade(from: string, made: () => Iterable<readonly [hour: string, ids: Iterable<string>]>): ReadonlyMap<string, number> {
    if (this.made === undefined || from < this.madeFrom) {
      const counts = new Map<string, number>();
      for (const [hour, ids] of made()) {
        if (hour < from) continue;
        let n = 0;
        for (const id of ids) if (this.at.has(id)) n++;
        if (n > 0) counts.set(hour, n);
      }
      this.made = counts;
    } else for (const hour of this.made.keys()) if (hour < from) this.made.delete(hour);
    this.madeFrom = from;
    return this.made;
  }

  private count(hour: number, by: number): void {
    const n = (this.byHour.get(hour) ?? 0) + by;
    if (n === 0) this.byHour.delete(hour);
    else this.byHour.set(hour, n);
  }

  /** Tokens last used in the hour of `ms` or later (a walk of the hours, not of the tokens). */
  usedSince(ms: number): number {
    const from = hourOf(ms);
    let n = 0;
    for (const [hour, count] of this.byHour) if (hour >= from) n += count;
    return n;
  }

  /** A use of this token at `ms`. Later uses only; one a second is plenty for minute resolution. */
  touch(accessor: string, ms: number): void {
    const prev = this.at.get(accessor);
    if (prev !== undefined && ms < prev + 1000) return;
    this.put(accessor, ms, prev);
    this.unflushed.add(accessor);
  }

  /**
   * A use another server reported: kept when it is later than what is known, and then flushed
   * like one seen here. A time past this server's clock by more than PEER_SKEW_MS is taken as
   * that far: a use in the future would keep a login token from ever going idle.
   */
  merge(accessor: string, reported: number, now = Date.now()): void {
    const ms = Math.min(reported, now + PEER_SKEW_MS);
    const prev = this.at.get(accessor);
    if (prev !== undefined && ms <= prev) return;
    this.put(accessor, ms, prev);
    this.unflushed.add(accessor);
  }

  /** A use read from the disk or from the leader's batch: already durable, nothing to flush. */
  adopt(accessor: string, ms: number): void {
    const prev = this.at.get(accessor);
    if (prev === undefined || ms > prev) this.put(accessor, ms, prev);
  }

  /** The token is gone. */
  forget(accessor: string): void {
    this.unflushed.delete(accessor);
    const prev = this.at.get(accessor);
    if (prev === undefined) return;
    this.count(hourOf(prev), -1);
    if (this.made !== undefined) this.countMade(this.madeHourOf?.(accessor), -1);
    this.at.delete(accessor);
  }

  /** Whether a use of this token is known. */
  has(accessor: string): boolean {
    return this.at.has(accessor);
  }

  get(accessor: string): number | undefined {
    return this.at.get(accessor);
  }

  /** Tokens with a known use. */
  get size(): number {
    return this.at.size;
  }

  /** Uses to write (or report to the leader), at most `limit`; they count as flushed from now on. */
  takeUnflushed(limit = Number.POSITIVE_INFINITY): Array<[string, number]> {
    const out: Array<[string, number]> = [];
    for (const id of this.unflushed) {
      if (out.length >= limit) break;
      this.unflushed.delete(id);
      const ms = this.at.get(id);
      if (ms !== undefined) out.push([id, ms]);
    }
    return out;
  }

  /** Uses taken that could not be written or sent: they wait for the next try. */
  giveBack(uses: ReadonlyArray<readonly [string, number]>): void {
    for (const [id] of uses) if (this.at.has(id)) this.unflushed.add(id);
  }

  /**
   * Takes another book's uses where they are later (a store reloaded or replaced keeps what this
   * server saw): they are flushed again, since the new disk may not hold them.
   */
  keepNewer(from: LastUseBook): void {
    for (const [id, ms] of from.at) this.merge(id, ms);
  }
}

/** The minute a use is shown at (RFC 3339, seconds zero), as `LastUsedTime`. */
export function lastUsedTime(ms: number): string {
  return new Date(ms - (ms % 60_000)).toISOString().replace('.000Z', 'Z');
}

/** Uses one report to a leader or the primary carries, at most (a frame of about 1 MB). */
export const USES_PER_REPORT = 20_000;

/** Last uses as servers report them to their leader or the primary: at most a report's worth of [AccessorID, ms]. */
export const lastUsesSchema = z.array(z.tuple([z.string().min(1).max(128), z.number().int().nonnegative()])).max(USES_PER_REPORT);

/** What a flush needs of the store. */
export interface LastUseStore {
  readonly lastUse: LastUseBook;
  transact<T>(fn: (tx: { putLastUse(accessor: string, ms: number): boolean }) => T): Promise<T>;
}

/** Uses written in one batch, at most: a flush of more takes several, with requests served between them. */
const FLUSH_BATCH = 5_000;

/**
 * Writes the uses seen since the last flush, in batches of their own (no index, no change-log
 * entry, no waiter woken); on an HA leader the batches reach the followers as every batch does.
 * Uses of a batch that fails wait for the next flush. Answers how many were written.
 */
export async function flushLastUses(
  store: LastUseStore,
  onWritten?: (uses: ReadonlyArray<readonly [string, number]>) => void,
): Promise<number> {
  const book = store.lastUse;
  let written = 0;
  for (;;) {
    const uses = book.takeUnflushed(FLUSH_BATCH);
    if (uses.length === 0) return written;
    try {
      const gone = await store.transact((tx) => uses.filter(([id, ms]) => !tx.putLastUse(id, ms)));
      // Deleted since they were used: nothing to keep.
      for (const [id] of gone) book.forget(id);
      onWritten?.(gone.length === 0 ? uses : uses.filter(([id]) => book.get(id) !== undefined));
    } catch (err) {
      book.giveBack(uses);
      throw err;
    }
    written += uses.length;
    if (uses.length < FLUSH_BATCH) return written;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/**
 * The leader's flush of last uses every `interval` ms, and once more when it stops leading
 * or the server stops (a clean stop keeps every use).
 */
export class LastUseFlusher {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly store: LastUseStore,
    private readonly interval: number,
    private readonly onError: (err: unknown) => void,
    /** Told of the uses each flush wrote (a secondary reports its global tokens' to the primary). */
    private readonly written?: (uses: ReadonlyArray<readonly [string, number]>) => void,
  ) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.flush(), this.interval);
    this.timer.unref();
  }

  /** Writes what is unflushed now (one flush at a time). */
  flush(): Promise<unknown> {
    this.running = this.running.then(() => flushLastUses(this.store, this.written).catch(this.onError));
    return this.running;
  }

  /** Writes what is unflushed now, when it runs (on the leader: a follower has nothing of its own to write). */
  async flushIfRunning(): Promise<void> {
    if (this.timer) await this.flush();
  }

  /** Stops, with a last flush when it was running (a follower has nothing of its own to write). */
  async stop(): Promise<void> {
    if (!this.timer) return;
    clearInterval(this.timer);
    this.timer = undefined;
    await this.flush();
  }
}
