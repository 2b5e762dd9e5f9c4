import { hostname } from 'node:os';
import { type ClientOptions, WatchwordClient } from './client.js';
import { WELL_FORMED_SECRET, milliseconds } from './failures.js';

// The enforcing client's options (checked here), counters and events (authorizer.ts).

/**
 * What to answer when the daemon cannot be reached (Consul's `acl.down_policy`):
 * - `extend-cache` (default): cached tokens keep their last known rules past the TTL; others are denied.
 * - `async-cache`: the same, and a stale token is answered at once from the cache while it is refreshed.
 * - `deny`: everything is denied until the daemon answers again.
 * - `allow`: everything is allowed until the daemon answers again.
 * "Cannot be reached" means a refused, reset or timed-out connection or a 5xx answer. A 429, an
 * answer that cannot be read, or a secret that cannot be sent are not outages: they are denied.
 * A known token is judged by its last rules for `tokenTTL` after the daemon last confirmed them,
 * never longer while the daemon answers 429 (anyone able to send requests could otherwise keep a
 * revoked token alive).
 */
export type DownPolicy = 'extend-cache' | 'async-cache' | 'deny' | 'allow';

export interface AuthorizerOptions {
  /**
   * The daemon to ask (a client, or the options of one). Its own token is never used, nor
   * WATCHWORD_HTTP_TOKEN: every question is asked with the caller's secret only.
   */
  client?: WatchwordClient | ClientOptions;
  /**
   * This service's own token, which opens the watch that keeps every cached token current over
   * one connection; it needs `acl:read`. Without it (or when the daemon refuses the watch) the
   * `blockingReads` most used tokens are kept current by a blocking read each, and a warning says so once.
   */
  token?: string;
  /** Tokens kept current by a blocking read each while there is no watch (default 16; 0: none, re-read after tokenTTL). */
  blockingReads?: number;
  /** Told once when the watch cannot be had (default: process.emitWarning). */
  onWarning?: (message: string) => void;
  /**
   * The servers to ask, in order of preference (URLs or host:port), each with the client's other
   * settings (TLS, namespace). A server that cannot be reached is passed over for the next at
   * once; the one that answered is asked first from then on. Default: the client's address only.
   */
  addresses?: string[];
  /** How long the daemon's word on a token holds without being confirmed (ms or a Go duration; default 30 s). */
  tokenTTL?: number | string;
  /** When the daemon cannot be reached (default `extend-cache`). */
  downPolicy?: DownPolicy;
  /** Tokens kept at once; the least recently used goes first (default 10,000). */
  maxTokens?: number;
  /** How long an unknown secret is remembered as unknown (default 1 s). */
  negativeTTL?: number;
  /** One request's time limit before the daemon counts as unreachable (default 5 s). */
  requestTimeoutMs?: number;
  /** HTTP connections to the daemon at once, besides the watch (default 1; first look-ups wait their turn). */
  maxConnections?: number;
  /** This service's name in the daemon's audit log (`denied-by-client`); default `host:pid`. */
  name?: string;
  /** Whether denials (and a sample of allows) are reported to the daemon, once a second over the watch (default true). */
  reportDecisions?: boolean;
}

/** What the Authorizer has done since it was made (`stats()`). */
export interface AuthorizerStats {
  /** Questions answered from the cache without waiting on a server (including cached denials). */
  hits: number;
  /** Questions that waited on a server: a secret seen for the first time, or one past its TTL. */
  misses: number;
  /** Answers a server gave to keep cached tokens current (blocking watches and re-reads). */
  refreshes: number;
  /** Questions answered by the down policy while no server could be reached. */
  downAnswers: number;
  /** Times a request moved on to the next address because one could not be reached. */
  failovers: number;
  /** Tokens cached now. */
  cached: number;
  /** Whether no server can be reached now (the down policy is in force). */
  down: boolean;
  /** The address asked first now. */
  address: string;
  /** Reports of decisions sent to the daemon, and decisions not reported (past a batch's bound, or the daemon away). */
  reports: number;
  reportsDropped: number;
  /** The watch: `open`, `connecting`, `unavailable` (refused: an older daemon, a proxy, no right), or `off` (no token given). */
  watch: WatchState;
  /** Tokens kept current by a blocking read each now (while the watch is not open, and the anonymous token). */
  blockingReads: number;
}

export type WatchState = 'open' | 'connecting' | 'unavailable' | 'off';

/** Told with `'down'`: no server could be reached, and the down policy now speaks for them. */
export interface AuthorizerDownEvent {
  /** When the first request failed (ms since the epoch). */
  since: number;
  /** Why the last address tried failed (never a secret). */
  reason: string;
  downPolicy: DownPolicy;
}

/** Told with `'up'`: a server answered again. */
export interface AuthorizerUpEvent {
  /** How long no server could be reached. */
  downForMs: number;
  /** The server that answered. */
  address: string;
}

/** Where a check is judged; by default where the token lives. */
export interface CheckPlace {
  namespace?: string;
  partition?: string;
}

/** Tokens kept current by a blocking read each when the watch cannot be had (default). */
const BLOCKING_READS = 16;

/** An Authorizer's options checked (a TypeError names the first wrong one), with their defaults. */
export function checkedOptions(options: AuthorizerOptions) {
  const timeoutMs = options.requestTimeoutMs ?? 5_000;
  // No default token and no environment: a caller without a secret is anonymous, never us.
  const own = { timeoutMs, token: null, maxConnections: options.maxConnections ?? 1 };
  const client = options.client instanceof WatchwordClient ? options.client.with(own) : new WatchwordClient({ ...options.client, ...own });
  if (
    options.addresses !== undefined &&
    (!Array.isArray(options.addresses) ||
      options.addresses.length === 0 ||
      !options.addresses.every((a) => typeof a === 'string' && a.trim() !== ''))
  )
    throw new TypeError('addresses: expected a non-empty array of server addresses');
  const ttl = milliseconds(options.tokenTTL, 30_000);
  if (!(ttl >= 100 && ttl <= 24 * 3_600_000)) throw new TypeError('tokenTTL must be between 100 ms and 24 h');
  const down = options.downPolicy ?? 'extend-cache';
  if (!['extend-cache', 'async-cache', 'deny', 'allow'].includes(down))
    throw new TypeError(`downPolicy: one of extend-cache, async-cache, deny, allow; got ${JSON.stringify(down)}`);
  if (options.name !== undefined && (typeof options.name !== 'string' || options.name === '' || options.name.length > 128))
    throw new TypeError('name: expected a string of 1 to 128 characters');
  if (options.token !== undefined && (typeof options.token !== 'string' || !WELL_FORMED_SECRET.test(options.token)))
    throw new TypeError('token: expected the secret of a token with acl:read, which opens the watch');
  const blockingReads = options.blockingReads ?? BLOCKING_READS;
  if (!Number.isSafeInteger(blockingReads) || blockingReads < 0 || blockingReads > 1_000)
    throw new TypeError('blockingReads: expected a whole number from 0 to 1000');
  return {
    /** One client per address, in the order given. */
    clients: options.addresses?.map((address) => client.with({ address })) ?? [client],
    ttl,
    down,
    maxTokens: options.maxTokens ?? 10_000,
    negativeTTL: options.negativeTTL ?? 1_000,
    /** The name decisions are reported under; undefined: they are not reported. */
    reportAs: options.reportDecisions === false ? undefined : (options.name ?? `${hostname()}:${process.pid}`),
    ownToken: options.token,
    /** How long a first look-up waits for its answer (over HTTP or the watch). */
    timeoutMs,
    blockingReads,
    warn: options.onWarning ?? ((message: string) => process.emitWarning(message, { type: 'WatchwordWarning' })),
  };
}
