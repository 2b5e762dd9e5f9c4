/**
 * Secrets of tokens this server deleted a moment ago (by an API delete, a replicated one, the
 * reaper's revocation of an idle login token, or a new secret replacing one), kept in memory
 * only. Not those of expired tokens the reaper deletes: every server refuses an expired token
 * from its ExpirationTime on without being told, and a reap of millions would push the
 * revocations that matter out of the ring. A server that does not hold a
 * secret asks the leader or the primary about it, and such look-ups are limited per client;
 * a secret known to be gone is answered "ACL not found" without one. So an enforcing client
 * that re-checks a token deleted at the primary hears so at once, whatever anyone else
 * spends of the look-up budget (a flood of made-up secrets cannot keep a revoked token alive).
 *
 * Bounded in count and age: the oldest go first. A token made again with the same secret
 * elsewhere and not yet replicated here reads as gone until it arrives (at most `maxAgeMs`).
 */
export class GoneSecrets {
  /** Secret -> when it went (ms since the epoch). */
  private readonly gone = new Map<string, number>();
  /**
   * The secrets in the order they went, in a ring: the oldest is overwritten first. (Deleting a
   * Map's first key over and over is not O(1) in V8: each look for the first key walks the holes
   * the deletes left, which made a reaper deleting hundreds of thousands of tokens spend most of
   * its time here.)
   */
  private readonly ring: Array<string | undefined>;
  private readonly ringAt: Float64Array;
  private head = 0;

  constructor(
    private readonly maxEntries = 100_000,
    private readonly maxAgeMs = 5 * 60_000,
    private readonly now: () => number = Date.now,
  ) {
    this.ring = new Array<string | undefined>(maxEntries);
    this.ringAt = new Float64Array(maxEntries);
  }

  /** Notes that the token holding `secret` was deleted, or no longer holds it. */
  add(given: string): void {
    // A copy of its own: the secret given is often a slice of a larger string (a header, a body)
    // that a slice keeps alive, and the ring keeps 100,000 of them (a 30-minute churn run held
    // 4.6 MB of such parents for ~30,000 notes).
    const secret = Buffer.from(given, 'utf8').toString('utf8');
    const at = this.now();
    const oldest = this.ring[this.head];
    // Still the entry the ring holds (not noted again since, nor forgotten): it goes.
    if (oldest !== undefined && this.gone.get(oldest) === this.ringAt[this.head]) this.gone.delete(oldest);
    this.ring[this.head] = secret;
    this.ringAt[this.head] = at;
    this.head = (this.head + 1) % this.maxEntries;
    this.gone.set(secret, at);
  }

  /** A token with this secret exists again here. */
  forget(secret: string): void {
    this.gone.delete(secret);
  }

  /** Whether a token holding `secret` went from here within `maxAgeMs`. */
  has(secret: string): boolean {
    const at = this.gone.get(secret);
    if (at === undefined) return false;
    if (this.now() - at <= this.maxAgeMs) return true;
    this.gone.delete(secret);
    return false;
  }

  get size(): number {
    return this.gone.size;
  }
}
