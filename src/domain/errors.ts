/**
 * The one error class of watchword. Every failure a caller can see carries a stable
 * `code`; only the HTTP layer maps codes to statuses, and callers branch on the code,
 * never on the message.
 */
import type { Reason } from './rules/explain-types.js';

export const ErrorCodes = [
  /** Malformed or invalid request: bad JSON, unknown field, a validation rule broken. */
  'INVALID_REQUEST',
  /** The presented secret is unknown or expired. */
  'ACL_NOT_FOUND',
  /** The token lacks the permission the operation needs. */
  'PERMISSION_DENIED',
  /** A protected object or action: built-ins, the anonymous token, a second bootstrap. */
  'NOT_PERMITTED',
  /** The object named in the path does not exist. */
  'NOT_FOUND',
  /** A known path was called with a method it does not serve. */
  'METHOD_NOT_ALLOWED',
  /** A name or ID is already in use. */
  'CONFLICT',
  /** The request body exceeds the size limit. */
  'BODY_TOO_LARGE',
  /** A configured request rate limit was exceeded. */
  'RATE_LIMITED',
  /** The store cannot write (disk full, I/O error): the write was not made; it recovers by itself. */
  'STORE_UNAVAILABLE',
  /** audit_log_mode is enforced and the audit log cannot be written: the write was not made. */
  'AUDIT_UNAVAILABLE',
  /** The request's Host is not one this daemon answers to (DNS rebinding guard, http_allowed_hosts). */
  'HOST_NOT_ALLOWED',
  /** A request that was already forwarded between datacenters would be forwarded again. */
  'FORWARD_LOOP',
  /** This server is not its datacenter's leader and cannot reach one (docs/servers.md, "Several servers per datacenter"). */
  'NO_LEADER',
  /** A secondary could not reach the primary in time. */
  'PRIMARY_UNAVAILABLE',
  /** A primary of a lower epoch than one already seen (a stale primary): its stream or write is refused. */
  'STALE_PRIMARY',
  /** The primary is handing its role to another datacenter (a planned transfer): global writes wait a moment. */
  'PRIMARY_TRANSFER',
  /** A token would go past a quota (docs/http-api.md, "Quotas"): its scope holds as many as it may, or the expiry asked is outside its limits. */
  'QUOTA_EXCEEDED',
  /** A feature that needs every server is off until every server runs a release with it and the upgrade is finalized. */
  'FEATURE_NOT_ENABLED',
  /** A real fault inside the daemon (storage, bug). The message shown to callers is generic. */
  'INTERNAL',
] as const;

export type ErrorCode = (typeof ErrorCodes)[number];

export class WatchwordError extends Error {
  readonly code: ErrorCode;
  /** Seconds after which a retry may succeed (RATE_LIMITED); sent as Retry-After. */
  readonly retryAfter: number | undefined;
  /** A refusal's reason (PERMISSION_DENIED): the rule that decided it, for the audit log (docs/operator-insight.md). */
  readonly decision: Reason | undefined;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown; retryAfter?: number; decision?: Reason }) {
    super(message, options);
    this.name = 'WatchwordError';
    this.code = code;
    this.retryAfter = options?.retryAfter;
    this.decision = options?.decision;
  }
}

export const isWatchwordError = (err: unknown): err is WatchwordError => err instanceof WatchwordError;

export const invalid = (message: string): WatchwordError => new WatchwordError('INVALID_REQUEST', message);

export const notFound = (message: string): WatchwordError => new WatchwordError('NOT_FOUND', message);

/**
 * A write (update, clone) naming an object that does not exist: 400 with Consul's words. A
 * read of one is 404 (clients take it for "absent"); a write that did nothing must fail in
 * every client, and most Consul clients turn a 404 into a quiet "none".
 */
export const missingTarget = (message: string): WatchwordError => new WatchwordError('INVALID_REQUEST', message);

export const conflict = (message: string): WatchwordError => new WatchwordError('CONFLICT', message);

export const notPermitted = (message: string): WatchwordError => new WatchwordError('NOT_PERMITTED', `Permission denied: ${message}`);

export const aclNotFound = (): WatchwordError => new WatchwordError('ACL_NOT_FOUND', 'ACL not found');
