/**
 * Which cached tokens an enforcing client keeps current by a blocking read each when it cannot
 * have its watch (no token of its own, an older daemon, a proxy that does not carry WebSocket
 * upgrades): the ones used most, at most `max` at once, so that revocation stays fast for the
 * tokens that matter and the client holds a bounded number of connections. Uses are counted as
 * they happen and halved every round, so "most" means "most lately".
 */
export class BlockingReadSet<K> {
  private readonly uses = new Map<K, number>();
  private readonly held = new Map<K, AbortController>();

  constructor(
    readonly max: number,
    /** Holds a blocking read on `key` until `stop` aborts (or the read ends by itself: the token went). */
    private readonly hold: (key: K, stop: AbortSignal) => Promise<void>,
  ) {}

  /** One use of `key` (the hot path: one map update). */
  used(key: K): void {
    this.uses.set(key, (this.uses.get(key) ?? 0) + 1);
  }

  /** Starts a read on `key` at once when there is room (a token just resolved, before the next round). */
  offer(key: K): void {
    if (this.held.size < this.max && !this.held.has(key)) this.start(key);
  }

  /** A round: the `max` most used of `alive` keys held, the others let go; counts halved. */
  keep(alive: (key: K) => boolean): void {
    const ranked = [...this.uses].filter(([k]) => alive(k)).sort((a, b) => b[1] - a[1]);
    const wanted = new Set(ranked.slice(0, this.max).map(([k]) => k));
    const waiting = [...wanted].filter((k) => !this.held.has(k));
    // A held read is let go when its token went, or when one used more needs its place.
    for (const [k, stop] of this.held) {
      if (!alive(k) || (!wanted.has(k) && waiting.length > this.max - this.held.size)) this.let(k, stop);
    }
    for (const k of waiting) if (this.held.size < this.max) this.start(k);
    for (const [k, n] of this.uses) {
      if (!alive(k) || n < 1) this.uses.delete(k);
      else this.uses.set(k, Math.floor(n / 2));
    }
  }

  /** Lets go of one key (forgotten, gone). */
  drop(key: K): void {
    this.uses.delete(key);
    const stop = this.held.get(key);
    if (stop !== undefined) this.let(key, stop);
  }

  /** Lets go of every read (the watch is back, or the client closes). */
  stop(): void {
    for (const [k, stop] of this.held) this.let(k, stop);
  }

  get size(): number {
    return this.held.size;
  }

  private start(key: K): void {
    const stop = new AbortController();
    this.held.set(key, stop);
    void this.hold(key, stop.signal).finally(() => {
      if (this.held.get(key) === stop) this.held.delete(key);
    });
  }

  private let(key: K, stop: AbortController): void {
    this.held.delete(key);
    stop.abort();
  }
}
