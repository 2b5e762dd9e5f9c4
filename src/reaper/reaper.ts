import { systemActor } from '../observability/audit.js';
import { setTimeout as sleep, setImmediate as yieldToEventLoop } from 'node:timers/promises';

/** CPU work a batch of deletes takes, about, ms: its size follows from the last batch's work. */
const BATCH_WORK_MS = 8;
const FIRST_BATCH = 256;
const MIN_BATCH = 16;
/**
 * While requests are served, a batch and the rest after it last REST_FACTOR + 1 times the work
 * the batch kept the event loop (its disk sync included in the rest). That work is about two
 * fifths of what a batch costs the core, measured from outside (`npm run bench:expiry`): LevelDB's
 * threads write and compact what it deletes, and the garbage collector follows. So a fifth of
 * the core is the reaper's, about, and requests keep four fifths.
 */
const REST_FACTOR = 12;
/**
 * Token deletes after which the disk is asked to compact what was deleted: this many, or a quarter
 * of the tokens held if more. Every delete counts, a reap's, a logout's or a replicated one's: each
 * leaves a tombstone. LevelDB keeps tombstones and old versions until its own compactions reach
 * them, and a compaction flushes the write-ahead log (up to 16 MiB): under a steady churn of
 * logins a small datacenter's store swung between 3 and 37 MB, then, compacted every 10,000
 * reaps, 3 to 20 MB minutes apart. A full-range compaction's cost grows with the tokens held, so a
 * large store waits for as large a share of them.
 */
const COMPACT_AFTER = 5_000;
const COMPACT_SHARE = 0.25;
import type { Clock } from '../domain/clock.js';
import type { ExpiryCursor, Store } from '../store/store.js';
import type { AuthMethodRecord } from '../domain/types.js';
import { parseDuration } from '../domain/duration.js';

/** A method's idle TTL for its login tokens: its own TokenIdleTTL, else the agent's. */
function idleTTLOf(method: AuthMethodRecord, agentTTL: number): number {
  if (method.TokenIdleTTL === undefined || method.TokenIdleTTL === '') return agentTTL;
  return parseDuration(method.TokenIdleTTL) ?? agentTTL;
}

export interface ReaperOptions {
  /** How often to look, ms. */
  interval: number;
  /** Only the primary deletes expired global tokens; every daemon deletes its own Local ones. */
  /** Whether this datacenter is the primary now (only it reaps global tokens; a promotion changes it). */
  isPrimary: () => boolean;
  /** Most tokens deleted in one batch. */
  batchSize?: number;
  /**
   * Whether requests were answered since it was last asked: the reaper then rests between its
   * batches, leaving the core to them (expired tokens are already invisible; reclaiming them can wait).
   */
  busy?: () => boolean;
  /** Asked after a large reap: compact the disk's deleted range (LevelDB keeps tombstones until it does). */
  compact?: () => Promise<void>;
  /**
   * Login tokens unused this long are revoked (docs/http-api.md, "Last use"); 0 turns it off. An auth
   * method's own TokenIdleTTL overrides it.
   */
  idleTTL?: number;
  /**
   * How late a use made away from this server may reach it (a follower's report, another
   * datacenter's flush and report), ms: a token is judged idle only once unused for its TTL and
   * this, so a use within the TTL anywhere keeps it. Default 0.
   */
  idleGrace?: number;
  /** Told how many tokens each pass deleted (metrics, logs); `reason`: expired or idle. */
  onReaped?: (count: number, reason: 'expired' | 'idle') => void;
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
  /**
   * Since when this server has recorded every use (it started leading): a use before then may
   * not have reached it, so no token is judged idle for longer than this server has watched.
   */
  private watchingSince = 0;
  /** When the idle pass last ran. */
  private idleCheckedAt = Number.NEGATIVE_INFINITY;
  /** `store.deletedTokens()` when the disk was last asked to compact (or the reaper was made). */
  private compactedAt: number;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly options: ReaperOptions,
  ) {
    this.compactedAt = store.deletedTokens();
  }

  start(): void {
    this.stopped = false;
    this.watchingSince = this.clock.now();
    this.schedule();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.pass();
      this.running
        .catch((err: unknown) => this.options.onError?.(err))
        .finally(() => {
          this.running = undefined;
          this.schedule();
        });
    }, this.options.interval);
    this.timer.unref();
  }

  /**
   * What runs every interval: the expired tokens deleted, the idle ones when that is due, then the
   * disk asked to compact once enough have gone since it last was. Returns how many were deleted.
   */
  async pass(): Promise<number> {
    const n = (await this.reapOnce()) + (this.idleDue() ? await this.reapIdle() : 0);
    await this.compactDue();
    return n;
  }

  /**
   * Every token expired now that this daemon may delete. Returns how many. A
   * batch is bounded in count and in time (it grows or shrinks to about BATCH_WORK_MS of work),
   * and while requests are served the reaper rests REST_FACTOR times as long as each batch took.
   */
  async reapOnce(): Promise<number> {
    const most = this.options.batchSize ?? 4096;
    let size = Math.min(most, FIRST_BATCH);
    const now = this.clock.now();
    let total = 0;
    let after: ExpiryCursor | undefined;
    for (;;) {
      const started = performance.now();
      const candidates = this.store.reader.expiredTokens(now, size, after);
      if (candidates.length === 0) break;
      const last = candidates[candidates.length - 1] as ExpiryCursor;
      after = last;
      const timing = { ms: 0 };
      const written = this.store.transact(
        (tx) => {
          // Deleted as slots, unread: the expiry index says they are expired.
          const reaped = tx.reapExpired(candidates, this.options.isPrimary());
          // Not one change-log entry per token: one `expire` change names the batch (secondaries apply it through their own expiry index).
          if (reaped.global) tx.logExpired({ Time: last[0], AccessorID: last[1] });
          return reaped.deleted;
        },
        { audit: { type: 'reap', actor: systemActor('reaper'), details: { reason: 'expired' } }, timing },
      );
      // The batch's work on the event loop: finding and deleting them, then its disk batch built and applied once durable.
      const listed = performance.now() - started;
      total += await written;
      const work = listed + timing.ms;
      if (candidates.length < size || this.stopped) break;
      size = Math.min(most, Math.max(MIN_BATCH, Math.round((size * BATCH_WORK_MS) / Math.max(work, 0.25))));
      await this.rest(work, performance.now() - started);
    }
    if (total > 0) this.options.onReaped?.(total, 'expired');
    return total;
  }

  /** After a pass: the disk compacts the deleted range once enough tokens have gone, by any path, since it last did. */
  private async compactDue(): Promise<void> {
    const deleted = this.store.deletedTokens();
    if (deleted - this.compactedAt < Math.max(COMPACT_AFTER, this.store.count('tokens') * COMPACT_SHARE)) return;
    this.compactedAt = deleted;
    await this.options.compact?.().catch((err: unknown) => this.options.onError?.(err));
  }

  /**
   * Between batches: while requests are served they go first, the batch and its rest lasting
   * REST_FACTOR + 1 times its `work` (`elapsed`: since it started, its disk sync included); else a yield.
   */
  private async rest(work: number, elapsed: number): Promise<void> {
    if (this.options.busy?.()) await sleep(Math.max(1, work * (REST_FACTOR + 1) - elapsed));
    else await yieldToEventLoop();
  }

  /**
   * Revokes login tokens unused for their method's idle TTL, judged from this server's record of
   * each token's last use (to the millisecond), its CreateTime, and how long this server has
   * watched: a token used within the TTL is never revoked. Returns how many.
   */
  /**
   * Whether the idle pass is due: it reads every login token of every method, so it runs a tenth
   * of the shortest idle TTL apart (at most a minute, at least the reap interval), not every pass.
   */
  private idleDue(): boolean {
    let shortest = Number.POSITIVE_INFINITY;
    for (const m of this.store.tables.authMethods.values()) {
      const ttl = idleTTLOf(m, this.options.idleTTL ?? 0);
      if (ttl > 0) shortest = Math.min(shortest, ttl);
    }
    if (shortest === Number.POSITIVE_INFINITY) return false;
    const every = Math.min(60_000, Math.max(this.options.interval, shortest / 10));
    return this.clock.now() - this.idleCheckedAt >= every;
  }

  async reapIdle(): Promise<number> {
    const now = this.clock.now();
    this.idleCheckedAt = now;
    const batchSize = this.options.batchSize ?? 4096;
    let total = 0;
    for (const method of [...this.store.tables.authMethods.values()]) {
      const ttl = idleTTLOf(method, this.options.idleTTL ?? 0);
      const unusedFor = ttl + (this.options.idleGrace ?? 0);
      if (ttl <= 0 || now - this.watchingSince < unusedFor) continue;
      const cutoff = now - unusedFor;
      const idle: string[] = [];
      for (const t of this.store.tables.tokens.members('authMethod', method.Name)) {
        if (t.Partition !== method.Partition || (t.AuthMethodNamespace ?? t.Namespace) !== method.Namespace) continue;
        if (!t.Local && !this.options.isPrimary()) continue;
        if (Math.max(this.store.lastUse.get(t.AccessorID) ?? 0, Date.parse(t.CreateTime)) < cutoff) idle.push(t.AccessorID);
      }
      for (let i = 0; i < idle.length && !this.stopped; i += batchSize) {
        const ids = idle.slice(i, i + batchSize);
        total += await this.store.transact(
          (tx) => {
            let n = 0;
            const at = this.clock.now();
            // Judged again inside the transaction: a use since the list was made keeps the token.
            for (const id of ids) {
              const t = tx.peekToken(id);
              if (t === undefined || Math.max(this.store.lastUse.get(id) ?? 0, Date.parse(t.CreateTime)) >= at - unusedFor) continue;
              if (tx.delToken(t)) n++;
            }
            return n;
          },
          { audit: { type: 'reap', actor: systemActor('reaper'), details: { reason: 'idle' } } },
        );
        await this.rest(0, 0);
      }
    }
    if (total > 0) this.options.onReaped?.(total, 'idle');
    return total;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running?.catch(() => undefined);
  }
}
