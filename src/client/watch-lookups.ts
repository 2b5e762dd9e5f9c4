import type { WatchServerFrame } from '../api/watch-frames.js';

/**
 * How a first look-up over the watch ended (client/authorizer.ts):
 * - `found`: the daemon sent the token's view (installed by whoever reads the frame);
 * - `gone`: no token authenticates with the secret (what a request's 403 says);
 * - `refused`: the daemon cannot answer for it now, with the status and Retry-After a request
 *   would have got (a 429, a 5xx);
 * - `unanswered`: the watch ended first, or could not take look-ups: the secret is asked for over HTTP;
 * - `timedOut`: no answer within the request timeout, as a request that timed out;
 * - `broken`: the daemon's answer could not be read, as a request's would be.
 */
export type LookUpAnswer =
  | { t: 'found' }
  | { t: 'gone' }
  | { t: 'refused'; status: number; retryAfter: number }
  | { t: 'unanswered' }
  | { t: 'timedOut' }
  | { t: 'broken' };

interface Pending {
  /** The watch frame that carried it (undefined: waiting for the watch to open). */
  seq: number | undefined;
  readonly since: number;
  readonly settle: (answer: LookUpAnswer) => void;
}

/** How often look-ups are looked at for their timeout (a timer per look-up would cost more than the look-up). */
const TIMEOUT_SWEEP_MS = 250;

/**
 * First look-ups under way over one watch, by the number each secret has on it: answered as the
 * watch's frames name them, or when the frame that carried one is acknowledged without it, when
 * the watch ends, or after `timeoutMs`. Look-ups asked while the watch is still opening wait for
 * it (they are sent by `sendWaiting` once it is open), a second at most.
 */
export class WatchLookUps {
  private readonly pending = new Map<number, Pending>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly timeoutMs: number) {}

  /** Whether the look-up of `id` is under way. */
  has(id: number): boolean {
    return this.pending.has(id);
  }

  /** A look-up of `id`, carried by frame `seq` (undefined: it waits for the watch to open). */
  ask(id: number, seq: number | undefined): Promise<LookUpAnswer> {
    return new Promise<LookUpAnswer>((settle) => {
      this.answer(id, { t: 'unanswered' });
      this.pending.set(id, { seq, since: Date.now(), settle });
      this.timer ??= setInterval(() => this.expire(), TIMEOUT_SWEEP_MS);
      this.timer.unref();
    });
  }

  /** The watch opened: each waiting look-up is sent (`send` gives its frame, or undefined when it cannot be). */
  sendWaiting(send: (id: number) => number | undefined): void {
    for (const [id, p] of this.pending) {
      if (p.seq !== undefined) continue;
      p.seq = send(id);
      if (p.seq === undefined) this.answer(id, { t: 'unanswered' });
    }
  }

  /** The look-up of `id` is answered (false: there was none). */
  answer(id: number, answer: LookUpAnswer): boolean {
    const p = this.pending.get(id);
    if (p === undefined) return false;
    this.pending.delete(id);
    p.settle(answer);
    if (this.pending.size === 0) this.stopTimer();
    return true;
  }

  /**
   * A frame of the watch, once its views are installed (each answered `found` or `broken` by
   * the reader): its gone tokens and refusals answer look-ups; then what its ack covers and it
   * did not name is unanswered.
   */
  read(frame: WatchServerFrame): void {
    if (this.pending.size === 0) return;
    if (frame.t === 'changes') {
      for (const id of frame.gone) if (typeof id === 'number') this.answer(id, { t: 'gone' });
      for (const [id, status, retryAfter] of frame.refused ?? []) this.answer(id, { t: 'refused', status, retryAfter });
    }
    for (const [id, p] of this.pending) if (p.seq !== undefined && p.seq <= frame.ack) this.answer(id, { t: 'unanswered' });
  }

  /** The watch ended: every look-up is asked for again over HTTP. */
  lost(): void {
    for (const id of [...this.pending.keys()]) this.answer(id, { t: 'unanswered' });
  }

  close(): void {
    this.lost();
    this.stopTimer();
  }

  /**
   * A look-up sent and not answered within the timeout is timed out (an outage, as a request's
   * timeout); one still waiting for the watch to open after `openWaitMs` is asked over HTTP (a
   * watch that does not open says nothing of the server: a proxy may hold WebSocket upgrades).
   */
  private expire(): void {
    const now = Date.now();
    // Oldest first: the map keeps the order they were asked in.
    for (const [id, p] of this.pending) {
      if (p.since > now - this.openWaitMs) break;
      if (p.seq === undefined) this.answer(id, { t: 'unanswered' });
      else if (p.since <= now - this.timeoutMs) this.answer(id, { t: 'timedOut' });
    }
  }

  /** How long a look-up waits for the watch to open before it is asked over HTTP. */
  private get openWaitMs(): number {
    return Math.min(1_000, this.timeoutMs / 2);
  }

  private stopTimer(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
