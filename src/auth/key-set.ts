import type { JSONWebKeySet } from 'jose';
import { LoginRefused } from './identity.js';

/** Refetch for an unknown key ID at most this often, ms. */
const REFRESH_MIN_MS = 5000;
/** Keys older than this are fetched again (the old ones served meanwhile), ms. */
const STALE_MS = 5 * 60_000;
const BACKOFF_MIN_MS = 1000;
const BACKOFF_MAX_MS = 60_000;

/**
 * A method's remote key set (JWKS, or found by OIDC discovery), fetched as docs/security.md, "Security"
 * says: one fetch in flight per method (every login waiting joins it), the last good key
 * set kept and served when a later fetch fails, failures backing off from 1 s doubling to
 * 60 s (no fetch at all meanwhile), and every fetch under an absolute deadline (the
 * fetcher's). A flood of made-up key IDs or a failing provider costs one fetch per
 * interval, not one per login.
 */
export class KeySetCache<K> {
  private good: { keys: K; at: number } | undefined;
  private inflight: Promise<K> | undefined;
  private failures = 0;
  private retryAt = 0;
  private lastFailure = '';
  /** Fetches started, for tests and metrics. */
  fetches = 0;

  constructor(
    private readonly fetch: () => Promise<JSONWebKeySet>,
    private readonly build: (set: JSONWebKeySet) => K,
    private readonly now: () => number = Date.now,
  ) {}

  /** The keys to verify with; `refresh`: a token named a key not held (it may have rotated in). */
  async get(refresh: boolean): Promise<K> {
    const now = this.now();
    const good = this.good;
    if (this.inflight) return this.inflight;
    const wanted = !good || now - good.at > STALE_MS || (refresh && now - good.at > REFRESH_MIN_MS);
    if (!wanted) return (good as { keys: K }).keys;
    if (now < this.retryAt) {
      // Backing off: the last good keys, or the reason there are none.
      if (good) return good.keys;
      throw new LoginRefused(`${this.lastFailure}; the next try is in ${Math.ceil((this.retryAt - now) / 1000)} s`);
    }
    this.fetches++;
    this.inflight = this.fetch()
      .then((set) => {
        const keys = this.build(set);
        this.good = { keys, at: this.now() };
        this.failures = 0;
        this.retryAt = 0;
        return keys;
      })
      .catch((err: unknown) => {
        this.failures++;
        this.retryAt = this.now() + Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** (this.failures - 1));
        this.lastFailure = (err as Error).message;
        if (this.good) return this.good.keys;
        throw err instanceof LoginRefused ? err : new LoginRefused(this.lastFailure);
      })
      .finally(() => {
        this.inflight = undefined;
      });
    return this.inflight;
  }
}
