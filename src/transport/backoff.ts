/** Reconnect delays: exponential from `min` to `max`, with full jitter so secondaries do not reconnect in step. */
export class Backoff {
  private attempt = 0;

  constructor(
    private readonly min = 1000,
    private readonly max = 30_000,
    private readonly random: () => number = Math.random,
  ) {}

  next(): number {
    const ceiling = Math.min(this.max, this.min * 2 ** this.attempt);
    this.attempt++;
    return Math.max(this.min, Math.round(this.random() * ceiling));
  }

  reset(): void {
    this.attempt = 0;
  }
}
