import type { Reason } from '../domain/rules/explain-types.js';
import { STATUS_CODES } from 'node:http';
import type { FastifyError } from 'fastify';
import { type ErrorCode, WatchwordError, isWatchwordError } from '../domain/errors.js';

/** The only place that knows which HTTP status each error code means. */
export const STATUS: Record<ErrorCode, number> = {
  INVALID_REQUEST: 400,
  ACL_NOT_FOUND: 403,
  PERMISSION_DENIED: 403,
  NOT_PERMITTED: 403,
  HOST_NOT_ALLOWED: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  CONFLICT: 409,
  STALE_PRIMARY: 409,
  FEATURE_NOT_ENABLED: 409,
  QUOTA_EXCEEDED: 429,
  BODY_TOO_LARGE: 413,
  RATE_LIMITED: 429,
  INTERNAL: 500,
  PRIMARY_UNAVAILABLE: 503,
  NO_LEADER: 503,
  PRIMARY_TRANSFER: 503,
  STORE_UNAVAILABLE: 503,
  AUDIT_UNAVAILABLE: 503,
  FORWARD_LOOP: 508,
};

export interface ErrorBody {
  statusCode: number;
  error: string;
  code: ErrorCode;
  message: string;
}

export function errorBody(code: ErrorCode, message: string): ErrorBody {
  const statusCode = STATUS[code];
  return { statusCode, error: STATUS_CODES[statusCode] ?? 'Error', code, message };
}

/** The header that carries an error's stable code, whatever the body's format. */
export const ERROR_CODE_HEADER = 'x-service-error-code';

/**
 * Whether the caller prefers JSON to text: its Accept header names `application/json` (or
 * `application/*+json`) with a weight above that of `text/plain` (a range such as `*\/*` counts
 * for both, so only a named JSON wins). Consul's clients send no Accept, or `*\/*`, and read
 * error bodies as text; watchword's own client, CLI and UI ask for JSON.
 */
export function prefersJSON(accept: string | string[] | undefined): boolean {
  const header = Array.isArray(accept) ? accept.join(',') : accept;
  if (!header?.includes('json')) return false;
  let json = 0;
  let text = 0;
  for (const part of header.split(',')) {
    const [range = '', ...params] = part.trim().toLowerCase().split(';');
    const qParam = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    const q = qParam === undefined ? 1 : Number(qParam.slice(2));
    if (!(q > 0)) continue;
    const type = range.trim();
    if (type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'))) json = Math.max(json, q);
    else if (type === 'text/plain' || type === 'text/*') text = Math.max(text, q);
  }
  return json > 0 && json >= text;
}

/**
 * An error as the caller wants it: Consul's shape (`text/plain`, the message) unless it prefers
 * JSON (`{"statusCode","error","code","message"}`). The code goes in ERROR_CODE_HEADER either way.
 */
export function errorResponse(
  code: ErrorCode,
  message: string,
  accept: string | string[] | undefined,
): { contentType: string; body: string } {
  if (prefersJSON(accept)) return { contentType: 'application/json; charset=utf-8', body: JSON.stringify(errorBody(code, message)) };
  return { contentType: 'text/plain; charset=utf-8', body: message };
}

/** Maps anything thrown while serving a request to a WatchwordError; unknown faults become INTERNAL. */
export function toWatchwordError(err: unknown): WatchwordError {
  if (isWatchwordError(err)) return err;
  const fe = err as Partial<FastifyError> & { status?: number };
  const status = fe.statusCode ?? fe.status;
  if (fe.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || status === 413) {
    return new WatchwordError('BODY_TOO_LARGE', 'Request body is too large (limit 1 MiB)', { cause: err });
  }
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return new WatchwordError('INVALID_REQUEST', fe.message ?? 'Bad request', { cause: err });
  }
  return new WatchwordError('INTERNAL', 'internal error', { cause: err });
}

/** Refusals the audit log records: every 403, and every 429 (a limit reached: logins, unknown secrets, requests). */
export function isAuditedRefusal(status: number, code?: string): boolean {
  return status === 403 || status === 429 || code === 'STALE_PRIMARY';
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Records a refused request in the audit log. */
    auditRefusal?: (refusal: Refusal) => void;
  }
}

/** A refused request, as the audit log records it (the secret only to name its token, never written). */
export interface Refusal {
  id: string;
  method: string;
  url: string;
  remote: string;
  /** The forwarding server's address, when a proven server forwarded the request (remote is then the client it named). */
  via?: string;
  secret: string | undefined;
  status: number;
  code: string;
  message: string;
  route: string;
  /** Why a 403 was decided (the deciding source and rule), when a permission check decided it. */
  decision?: Reason;
}
