import { STATUS_CODES } from 'node:http';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { type ErrorCode, WatchwordError, isWatchwordError } from '../domain/errors.js';
import { sendJSON } from './respond.js';

/** The only place that knows which HTTP status each error code means. */
export const STATUS: Record<ErrorCode, number> = {
  INVALID_REQUEST: 400,
  ACL_NOT_FOUND: 403,
  PERMISSION_DENIED: 403,
  NOT_PERMITTED: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  CONFLICT: 409,
  BODY_TOO_LARGE: 413,
  RATE_LIMITED: 429,
  INTERNAL: 500,
  PRIMARY_UNAVAILABLE: 503,
  NO_LEADER: 503,
  STORE_UNAVAILABLE: 503,
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

export function sendError(request: FastifyRequest, reply: FastifyReply, err: unknown): FastifyReply {
  const e = toWatchwordError(err);
  if (e.code === 'INTERNAL') {
    request.log.error({ reqId: request.id, err: e.cause ?? e }, 'request failed with an internal error');
  }
  // Internal faults never leak their details (or any secret inside them) to the caller.
  const message = e.code === 'INTERNAL' ? 'internal error' : e.message;
  if (e.retryAfter !== undefined) void reply.header('Retry-After', String(e.retryAfter));
  const headers = request.server.readHeaders?.(request);
  if (headers) void reply.headers(headers);
  return sendJSON(request, reply.code(STATUS[e.code]), errorBody(e.code, message));
}
