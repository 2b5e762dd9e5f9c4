import { systemActor } from '../observability/audit.js';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { Clock } from '../domain/clock.js';
import { isExpired } from '../domain/expiry.js';
import type { ExpiryCursor, Store } from '../store/store.js';

export interface ReaperOptions {
  /** How often to look, ms. */
  interval: number;
  /** Only the primary deletes expired global tokens; every daemon deletes its own Local ones. */
  isPrimary: boolean;
  /** Most tokens deleted in one batch. */
  batchSize?: number;
  /** Told how many tokens each pass deleted (metrics, logs). */
  onReaped?: (count: number) => void;
  onError?: (err: unknown) => void;
}

/**
 * Deletes expired tokens. Walks the expiry index in time order, deletes at most
 * `batchSize` tokens per atomic batch, and yields between batches so requests keep
 * flowing. Expired tokens are already invisible everywhere; this reclaims them.
 */
export class Reaper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;
  private stopped = false;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly options: ReaperOptions,
  ) {}

  start(): void {
    this.stopped = false;
    this.schedule();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.reapOnce();
      this.running
        .catch((err: unknown) => this.options.onError?.(err))
        .finally(() => {
          this.running = undefined;
          this.schedule();
        });
    }, this.options.interval);
    this.timer.unref();
  }

  /** One full pass: every token expired now that this daemon may delete. Returns how many. */
  async reapOnce(): Promise<number> {
    const batchSize = this.options.batchSize ?? 4096;
    const now = this.clock.now();
    let total = 0;
    let after: ExpiryCursor | undefined;
    for (;;) {
      const candidates = this.store.reader.expiredTokens(now, batchSize, after);
      if (candidates.length === 0) break;
      after = (candidates[candidates.length - 1] as { cursor: ExpiryCursor }).cursor;
      const deleted = await this.store.transact(
        (tx) => {
          let n = 0;
          for (const { id } of candidates) {
            const token = tx.getToken(id);
            if (!token || !isExpired(token, now)) continue;
            if (!token.Local && !this.options.isPrimary) continue;
            if (tx.del('tokens', id)) n++;
          }
          return n;
        },
        { audit: { type: 'reap', actor: systemActor('reaper') } },
      );
      total += deleted;
      if (candidates.length < batchSize || this.stopped) break;
      await yieldToEventLoop();
    }
    if (total > 0) this.options.onReaped?.(total);
    return total;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running?.catch(() => undefined);
  }
}
