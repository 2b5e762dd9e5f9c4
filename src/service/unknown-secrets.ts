import { WatchwordError } from '../domain/errors.js';
import { RateLimiter } from '../transport/rate-limit.js';

/**
 * The one budget for secrets presented to the daemon that no token holds, whatever the door
 * they came by (a request's token header, an entry of an enforcing client's watch): so many per
 * client address per second, with a burst of five seconds' worth. A secret a token holds, held a
 * moment ago or holds expired is not a guess and costs nothing. Each door audits the refusal as
 * it always has (counted past a burst, the secret named by its HMAC); this says when a client
 * has guessed enough.
 */
export class UnknownSecretBudget {
  private readonly limiter: RateLimiter;

  constructor(rate: number, now: () => number = Date.now) {
    this.limiter = new RateLimiter(rate, Math.max(1, Math.ceil(rate * 5)), now);
  }

  /** Spends one of the client's budget; false once it is spent (the client waits). */
  trySpend(client: string | undefined): boolean {
    return this.limiter.take(client ?? '') === 0;
  }

  /** Spends one of the client's budget; past it, RATE_LIMITED with the seconds to wait. */
  spend(client: string | undefined): void {
    const wait = this.limiter.take(client ?? '');
    if (wait > 0)
      throw new WatchwordError(
        'RATE_LIMITED',
        `Too many unknown secrets from ${client ?? 'this client'}: at most ${this.limiter.rate} a second are answered`,
        { retryAfter: wait },
      );
  }
}
