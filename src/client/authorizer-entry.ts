import type { Authorizer as CompiledAuthorizer } from '../domain/rules/authorizer.js';
import type { Failure } from './failures.js';

// One token an enforcing client caches (client/authorizer.ts), and the small steps of its life.

/** One cached token. */
export interface Entry {
  readonly secret: string;
  /** Its number on the watch. */
  readonly id: number;
  authorizer?: CompiledAuthorizer;
  hash?: string;
  /** When the secret stops authenticating (its token's expiry, a rotation's overlap), on this process's monotonic clock (Infinity: never). */
  expiresAt: number;
  /** When the daemon last confirmed this entry (ms since the epoch). */
  confirmedAt: number;
  usedAt: number;
  /** Denied without rules since this time: unknown to the daemon (deleted, expired, never made), or not resolvable now. */
  goneAt?: number;
  /** The first resolution, while it runs. */
  loading?: Promise<void>;
  /** Dropped, or the Authorizer closed: no request is made for it any more. */
  stopped: boolean;
  /** Aborts its requests in flight; made with its first request (signalOf): a token looked up over the watch may never need one. */
  stopper?: AbortController;
  /** The watch frame that added it (its acknowledgement and every beat after confirm the entry); undefined: not on the watch. */
  sentSeq?: number;
  /** A re-read while the watch has not confirmed it for a TTL, while it runs. */
  attempt?: Promise<void>;
  /** Why the last request for this token failed (cleared by an answer). */
  failing?: Failure;
  /** Seconds the daemon asked us to wait (a 429's Retry-After). */
  retryAfter?: number;
  /** Re-reads that failed in a row, and when the next may be tried (back-off). */
  failures: number;
  retryAt: number;
}

export function stopEntry(entry: Entry): void {
  entry.stopped = true;
  entry.stopper?.abort();
}

/** The signal that ends the entry's requests (aborted already when the entry is stopped). */
export function signalOf(entry: Entry): AbortSignal {
  entry.stopper ??= new AbortController();
  if (entry.stopped) entry.stopper.abort();
  return entry.stopper.signal;
}

/** A secret first asked about now: to be resolved (`id` is its number on the watch). */
export function newEntry(secret: string, id: number, now: number): Entry {
  return { secret, id, expiresAt: Number.POSITIVE_INFINITY, confirmedAt: 0, usedAt: now, stopped: false, failures: 0, retryAt: 0 };
}

/** The daemon's word: this secret is unknown (deleted, expired or never made). */
export function unknownEntry(entry: Entry): void {
  entry.authorizer = undefined;
  entry.hash = undefined;
  entry.goneAt = Date.now();
  entry.failing = undefined;
  stopEntry(entry);
}
