/**
 * A token bucket per client address: `rate` requests per second with bursts up to
 * `burst`. Bounded memory: the least recently seen clients are forgotten first.
 */
export class RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    public rate: number,
    private burst: number,
    private readonly now: () => number = Date.now,
    private readonly maxClients = 100_000,
  ) {}

  /** New limits (a reload): buckets keep what they hold, capped at the new burst. */
  set(rate: number, burst: number): void {
    this.rate = rate;
    this.burst = burst;
  }

  /** Takes one request from the client's bucket; returns seconds to wait when empty, else 0. */
  take(client: string): number {
    const now = this.now();
    let b = this.buckets.get(client);
    if (b) {
      this.buckets.delete(client);
      b.tokens = Math.min(this.burst, b.tokens + ((now - b.at) / 1000) * this.rate);
      b.at = now;
    } else {
      if (this.buckets.size >= this.maxClients) this.buckets.delete(this.buckets.keys().next().value as string);
      b = { tokens: this.burst, at: now };
    }
    this.buckets.set(client, b);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - b.tokens) / this.rate));
  }
}
