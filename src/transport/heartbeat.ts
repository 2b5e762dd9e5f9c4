/**
 * The liveness half of every stream end (replication primary and secondary, server
 * leader and follower): a ping every `everyMs`; a peer silent for longer than
 * `deadAfterMs` is given up on. `heard()` is called for every frame received.
 */
export class Heartbeat {
  private timer: NodeJS.Timeout | undefined;
  private lastHeard = 0;

  constructor(
    private readonly options: {
      everyMs: number;
      deadAfterMs: number;
      /** Sends a ping (and whatever else rides on the beat). */
      beat: () => void;
      /** The peer went silent: this heartbeat has stopped; end the connection. */
      silent: (forMs: number) => void;
    },
  ) {}

  start(): void {
    this.stop();
    this.lastHeard = Date.now();
    this.timer = setInterval(() => {
      const quiet = Date.now() - this.lastHeard;
      if (quiet > this.options.deadAfterMs) {
        this.stop();
        this.options.silent(quiet);
        return;
      }
      this.options.beat();
    }, this.options.everyMs);
    this.timer.unref();
  }

  heard(): void {
    this.lastHeard = Date.now();
  }

  /** Since the last frame from the peer, ms (undefined before the first start). */
  sinceHeardMs(): number | undefined {
    return this.lastHeard === 0 ? undefined : Date.now() - this.lastHeard;
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
