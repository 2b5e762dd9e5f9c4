import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Logger } from 'pino';
import { auditPath } from '../observability/audit.js';
import type { Metrics } from '../observability/metrics.js';
import type { RequestContext } from '../service/context.js';
import type { ScopeHints } from '../service/scope.js';
import type { Refusal } from './errors.js';
import { ERROR_CODE_HEADER, STATUS, errorBody, errorResponse, isAuditedRefusal, toWatchwordError } from './errors.js';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { type ErrorCode, WatchwordError } from '../domain/errors.js';
import { sendJSON } from './respond.js';
import { type ForwarderCheck, clientAddress, clientWithBody, requestSecret, scopeHints, viaAddress } from './request.js';

/**
 * What every request goes through, whichever door it came in by (Fastify's routes, or the
 * hot paths served before routing, direct.ts), written once (as Fastify's handle-request.js is
 * the one path of its routes): the request's context, the answer to an error (audited when it
 * is a refusal), and the metric and log line of an answer.
 */

/** A request as the pipeline needs it, from either door. */
export interface RequestParts {
  /** Its id (Fastify's, or the direct path's own series). */
  id: string;
  method: string;
  /** The raw URL (audit lines keep its path, the query without `token`). */
  url: string;
  /** The socket's address. */
  ip: string;
  raw: IncomingMessage;
  secret: string | undefined;
  hints: ScopeHints;
  /** The route pattern that matched. */
  route: string;
  /** The body as read (a string), or the stream of an upload: what a forwarder's proof must cover. */
  body?: unknown;
}

/** The context a route's logic runs with: the caller's secret, where it points, who it is (a forwarded client when proven). */
export function contextOf(r: RequestParts, vouch: ForwarderCheck | undefined): RequestContext {
  const who = clientWithBody(r.ip, r.raw, vouch, r.body);
  const ctx: RequestContext = {
    hints: r.hints,
    client: r.ip,
    request: {
      id: r.id,
      method: r.method,
      path: auditPath(r.url),
      remote: who.client,
      ...(who.viaPeer !== undefined ? { via: who.viaPeer } : {}),
    },
  };
  if (r.secret !== undefined) ctx.secret = r.secret;
  return ctx;
}

/** An error's answer: its status, stable code, body as the caller prefers it, and Retry-After. */
export interface ErrorAnswer {
  status: number;
  code: string;
  contentType: string;
  body: string;
  /** The message as sent (a fault's details never are). */
  message: string;
  retryAfter?: number;
}

/**
 * The answer to anything thrown while serving a request: a fault is logged with its cause and
 * answered `internal error` (no detail, nor any secret inside it, leaks); a refusal (every 403,
 * the login limit's 429s) is audited with the caller named by its token, never its secret.
 */
export function errorAnswer(
  err: unknown,
  r: Pick<RequestParts, 'id' | 'method' | 'url' | 'route' | 'secret'> & {
    remote: () => string;
    /** The forwarding server's address, when a proven server forwarded it. */
    via?: () => string | undefined;
    accept: string | string[] | undefined;
  },
  sinks: { log: Pick<Logger, 'error'>; auditRefusal?: ((refusal: Refusal) => void) | undefined },
): ErrorAnswer {
  const e = toWatchwordError(err);
  if (e.code === 'INTERNAL') sinks.log.error({ reqId: r.id, err: e.cause ?? e }, 'request failed with an internal error');
  const message = e.code === 'INTERNAL' ? 'internal error' : e.message;
  const status = STATUS[e.code];
  if (sinks.auditRefusal && isAuditedRefusal(status, e.code)) {
    const via = r.via?.();
    sinks.auditRefusal({
      id: r.id,
      method: r.method,
      url: r.url,
      remote: r.remote(),
      ...(via !== undefined ? { via } : {}),
      secret: r.secret,
      status,
      code: e.code,
      message,
      route: r.route,
      ...(e.decision ? { decision: e.decision } : {}),
    });
  }
  const answer = errorResponse(e.code, message, r.accept);
  return {
    status,
    code: e.code,
    contentType: answer.contentType,
    body: answer.body,
    message,
    ...(e.retryAfter !== undefined ? { retryAfter: e.retryAfter } : {}),
  };
}

/**
 * One metrics sample per answer, and a debug log line (as Consul logs requests at debug): the
 * route pattern, never the URL, so no secret from a path or query string can reach the log.
 * Called for every answer: nothing is built for the log line unless debug is on (`id` is asked
 * for only then).
 */
export function answered(
  metrics: Pick<Metrics, 'observeRequest'>,
  log: Pick<Logger, 'debug' | 'isLevelEnabled'>,
  method: string,
  route: string,
  status: number,
  ms: number,
  id: () => string,
): void {
  metrics.observeRequest(method, route, status, ms / 1000);
  if (log.isLevelEnabled('debug')) log.debug({ reqId: id(), method, route, status, durationMs: Math.round(ms * 100) / 100 }, 'request');
}

/** The context of a request Fastify routed (the direct path makes its own from the same parts). */
export function requestContext(request: FastifyRequest): RequestContext {
  return contextOf(
    {
      id: String(request.id),
      method: request.method,
      url: request.url,
      ip: request.ip,
      raw: request.raw,
      secret: requestSecret(request),
      hints: scopeHints(request),
      route: request.routeOptions.url ?? '',
      body: request.body,
    },
    request.server.forwarderCheck,
  );
}

/** The error answer of a request Fastify routed, with its index headers (reads) and the stable code's header. */
export function sendError(request: FastifyRequest, reply: FastifyReply, err: unknown): FastifyReply {
  let secret: string | undefined;
  try {
    secret = requestSecret(request);
  } catch {
    secret = undefined;
  }
  const a = errorAnswer(
    err,
    {
      id: String(request.id),
      method: request.method,
      url: request.url,
      route: request.routeOptions.url ?? '',
      secret,
      remote: () => clientAddress(request),
      via: () => viaAddress(request),
      accept: request.headers.accept,
    },
    { log: request.log, auditRefusal: request.server.auditRefusal },
  );
  if (a.retryAfter !== undefined) void reply.header('Retry-After', String(a.retryAfter));
  const headers = request.server.readHeaders?.(request);
  if (headers) void reply.headers(headers);
  void reply.header(ERROR_CODE_HEADER, a.code);
  if (a.contentType.startsWith('application/json'))
    return sendJSON(request, reply.code(a.status), errorBody(a.code as ErrorCode, a.message));
  return reply.code(a.status).type(a.contentType).send(a.body);
}

/** The highest primary epoch a secondary has seen, sent with each write it forwards to the primary (docs/datacenters.md). */
export const PRIMARY_EPOCH_HEADER = 'x-service-primary-epoch';

/**
 * At the primary (`epoch` its own), a forwarded write from a secondary that has seen a higher
 * epoch: this primary is stale (a secondary was promoted since), and must not take it. Both
 * doors call it before a write runs; reads are not refused (they change nothing).
 */
export function refuseIfStale(
  method: string,
  headers: IncomingHttpHeaders,
  primaryEpoch: (() => number | undefined) | undefined,
  /** Told when a write is refused so: a newer primary exists, and this one should find it. */
  staleSeen?: () => void,
): void {
  const sent = headers[PRIMARY_EPOCH_HEADER];
  if (sent === undefined || primaryEpoch === undefined || method === 'GET' || method === 'HEAD') return;
  const seen = Number(Array.isArray(sent) ? sent[0] : sent);
  const epoch = primaryEpoch();
  if (epoch === undefined || !Number.isInteger(seen) || seen <= epoch) return;
  staleSeen?.();
  throw new WatchwordError(
    'STALE_PRIMARY',
    `This primary's epoch is ${epoch}, and the datacenter that forwarded this write has seen epoch ${seen}: ` +
      'a newer primary was promoted; the write was not made here',
  );
}
