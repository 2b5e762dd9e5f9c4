import { WatchwordError } from '../domain/errors.js';
import { RateLimiter } from '../transport/rate-limit.js';
import type { PeerClient } from '../transport/peer-client.js';
import type { ClusterStore } from '../store/store.js';

/**
 * Secrets this server does not hold, looked up where they may have been created (the
 * leader, or the primary). When found, waits (briefly) for the token to arrive here.
 * Negative answers are kept for a second; look-ups are limited per client
 * (RATE_LIMITED past it), so made-up secrets do not each become a trip.
 */
export class SecretLookup {
  private readonly unknown = new Map<string, number>();
  private readonly limiter: RateLimiter;

  constructor(rate: number) {
    this.limiter = new RateLimiter(rate, Math.max(1, Math.ceil(rate * 2)));
  }

  async lookUp(
    secret: string,
    client: string | undefined,
    peer: PeerClient,
    waitForApplied: (index: number, timeoutMs: number) => Promise<boolean>,
  ): Promise<boolean> {
    const now = Date.now();
    if ((this.unknown.get(secret) ?? 0) > now) return false;
    const wait = this.limiter.take(client ?? '');
    if (wait > 0) {
      throw new WatchwordError(
        'RATE_LIMITED',
        `Too many unknown secrets from ${client ?? 'this client'}: secrets this datacenter does not hold are looked up at the primary ` +
          `at most ${this.limiter.rate} times per second per client`,
        { retryAfter: wait },
      );
    }
    try {
      const { found, index } = await peer.lookupSecret(secret, 2000);
      if (!found) {
        if (this.unknown.size >= 10_000) this.unknown.clear();
        this.unknown.set(secret, now + 1000);
        return false;
      }
      return await waitForApplied(index, 3000);
    } catch {
      // Unreachable: answer from what this server holds.
      return false;
    }
  }
}

/**
 * Resolves true once the store's durable index reaches `index`, false after `timeoutMs`.
 * `comparable` says whether this store's indexes are those of the batch log `index` comes
 * from (a follower between its leader's snapshot and its install is not): until it holds,
 * no index counts.
 */
export async function waitForIndex(
  store: Pick<ClusterStore, 'currentIndex' | 'onCommit'>,
  index: number,
  timeoutMs: number,
  comparable: () => boolean = () => true,
): Promise<boolean> {
  return (await awaitIndex(store, index, timeoutMs, comparable)) === 'reached';
}

/** As waitForIndex, and `ended` once `ended()` holds first (the stream the index was to come over is gone). */
export function awaitIndex(
  store: Pick<ClusterStore, 'currentIndex' | 'onCommit'>,
  index: number,
  timeoutMs: number,
  comparable: () => boolean,
  ended: () => boolean = () => false,
): Promise<'reached' | 'timeout' | 'ended'> {
  const reached = () => store.currentIndex() >= index && comparable();
  if (reached()) return Promise.resolve('reached');
  if (ended()) return Promise.resolve('ended');
  return new Promise((resolve) => {
    const off = store.onCommit(() => check());
    // A stream's welcome (or its end) changes `comparable` without a commit.
    const poll = setInterval(() => check(), 25);
    const timer = setTimeout(() => finish(reached() ? 'reached' : 'timeout'), timeoutMs);
    function check(): void {
      if (reached()) finish('reached');
      else if (ended()) finish('ended');
    }
    function finish(how: 'reached' | 'timeout' | 'ended'): void {
      off();
      clearInterval(poll);
      clearTimeout(timer);
      resolve(how);
    }
  });
}
