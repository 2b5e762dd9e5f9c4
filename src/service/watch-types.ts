import type { TokenAuthorizerResponse } from '../api/schemas.js';
import type { CommitEvent } from '../store/store.js';
import type { ClientReport } from './watch-reports.js';

// The shapes the enforcing clients' watches are made of (service/authorizer-watch.ts): their bounds,
// what they need of the server, and what a connection is to them.

/** The bounds of every watch on this server (config: watch_*). */
export interface WatchLimits {
  /** Bytes waiting to be sent to one connection past which nothing more is made for it, nor read from it. */
  connectionBytes: number;
  /** Bytes waiting to be sent to every watch together; past it the connections holding most are closed. */
  totalBytes: number;
  /** Tokens every watch together holds; past it the connections holding most are closed. */
  totalTokens: number;
  /** Tokens the watches of one address, and of one credential, hold together. */
  tokensPerAddress: number;
  tokensPerCredential: number;
  /** Secrets no token holds or held a moment ago that one watch may present before it is closed. */
  unknownPerWatch: number;
}

export const DEFAULT_WATCH_LIMITS: WatchLimits = {
  connectionBytes: 1 << 20,
  totalBytes: 64 << 20,
  totalTokens: 2_000_000,
  tokensPerAddress: 1_000_000,
  tokensPerCredential: 1_000_000,
  unknownPerWatch: 16,
};

/** Beats at most this often and at least this rarely (ms). */
export const BEAT_RANGE = { min: 250, max: 30_000 } as const;
/** A token's view as a watch sends it. */
export interface WatchedAnswer {
  view: TokenAuthorizerResponse;
  hash: string;
  accessor: string;
  dependsOn: string[];
}

/** The token a watch was opened with: who the client is. */
export interface WatchCredential {
  accessor: string;
  secret: string;
}

/**
 * A first look-up's outcome (a version 3 watch): the secret now authenticates here (`found`), it
 * does not (`gone`: unknown, expired, deleted, or a global token this secondary cannot confirm),
 * or it cannot be answered now, with the HTTP status and Retry-After a request would have got.
 */
export type LookUpOutcome = 'found' | 'gone' | { status: number; retryAfter: number };

/** What the watches need of the server. */
export interface WatchDeps {
  onCommit(listener: (event: CommitEvent) => void): () => void;
  /** The token's view as a client compiles it, from this server's state alone; throws when it cannot be given (gone, stale). */
  view(secret: string): WatchedAnswer;
  /** Whether a token holds this secret, held it a moment ago (deleted, replaced), or holds it expired: not a guess. */
  known(secret: string): boolean;
  /**
   * A secret no token holds, presented on a watch from `client`: audited (counted past a burst)
   * and spent from the client's budget of unknown secrets. False once the budget is spent.
   */
  unknownSecret(secret: string, client: string): boolean;
  /**
   * A secret this server does not hold now, resolved as a request's token from `client` would
   * be: a secondary (or a follower) asks for it where it may have been made a moment ago, and a
   * secret no token holds is audited and spent from the client's budget of unknown secrets.
   */
  lookUp(secret: string, client: string): LookUpOutcome | Promise<LookUpOutcome>;
  /** Whether the watch's own token still authenticates and holds the right a watch needs. */
  credentialHolds(credential: WatchCredential): boolean;
  /** A watched token's use (its last use). */
  recordUse(accessor: string, ms: number): void;
  /** Whether global tokens cannot be confirmed now (a secondary cut off from its primary too long). */
  stale(): boolean;
  /** A client's report of its decisions, its tokens named by AccessorID. */
  report?(r: ClientReport): void;
  now(): number;
}

/** One connection, as the transport carrying it offers it. */
export interface WatchSocket {
  send(text: string): void;
  /** Bytes queued and not yet sent. */
  buffered(): number;
  /** Stops reading the client's frames, and reads them again. */
  pause(): void;
  resume(): void;
  close(code: number, reason: string): void;
}
