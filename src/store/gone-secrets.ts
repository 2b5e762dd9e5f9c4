/**
 * Secrets of tokens this server deleted a moment ago (by an API delete, a replicated one, the
 * reaper, or a new secret replacing one), kept in memory only. A server that does not hold a
 * secret asks the leader or the primary about it, and such look-ups are limited per client;
 * a secret known to be gone is answered "ACL not found" without one. So an enforcing client
 * that re-checks a token deleted at the primary hears so at once, whatever anyone else
 * spends of the look-up budget (a flood of made-up secrets cannot keep a revoked token alive).
 *
 * Bounded in count and age: the oldest go first. A token made again with the same secret
 * elsewhere and not yet replicated here reads as gone until it arrives (at most `maxAgeMs`).
 */
export class GoneSecrets {
  /** Secret -> when it went (ms since the epoch), oldest first (Map keeps insertion order). */
  private readonly gone = new Map<string, number>();

  constructor(
    private readonly maxEntries = 100_000,
    private readonly maxAgeMs = 5 * 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Notes that the token holding `secret` was deleted, or no longer holds it. */
  add(secret: string): void {
    this.gone.delete(secret);
    this.gone.set(secret, this.now());
    if (this.gone.size > this.maxEntries) this.gone.delete(this.gone.keys().next().value as string);
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
