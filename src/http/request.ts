import type { IncomingMessage } from 'node:http';
import type { FastifyRequest } from 'fastify';
import { FORWARD_BODY_HEADER, type ForwarderCheck, bodyHashOf } from '../transport/forward-proof.js';

export type { ForwarderCheck };
import { invalid } from '../domain/errors.js';
import { type ScopeHints, WILDCARD, checkScopeName } from '../service/scope.js';
import { secretOf } from '../transport/credentials.js';

export { secretOf };

/**
 * Marks a request one daemon sent to another, naming the sender's datacenter. A marked
 * request is never forwarded again: a datacenter registered at the wrong address turns
 * into one refused request, not a storm.
 */
export const FORWARDED_HEADER = 'x-service-forwarded-from';

/**
 * The original client's address on a forwarded request, so the receiving daemon limits
 * each client on its own rather than all of a peer's traffic as one, and audits who asked.
 * Believed only from a server that proves itself (transport/forward-proof.ts).
 */
export const FORWARDED_FOR_HEADER = 'x-service-forwarded-for';

/** An address as sockets report it, IPv4-mapped IPv6 unwrapped. */
export const plainAddress = (ip: string): string => ip.replace(/^::ffff:/, '');

const first = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[0] : v);

/** What a request's forwarding headers were found to say, once per request (a proof's nonce is good once). */
const vouched = new WeakMap<IncomingMessage, { client: string; viaPeer: string | undefined }>();

/**
 * The client a request counts against: its address, or for a request a server forwarded and
 * proves it forwarded (`vouch`), the original client's; `viaPeer` then names the forwarder.
 * Judged once per request.
 */
export function clientOf(
  ip: string,
  req: IncomingMessage,
  vouch: ForwarderCheck | undefined,
): { client: string; viaPeer: string | undefined } {
  // Not forwarded (nearly every request): the socket's address, nothing to judge or keep.
  if (req.headers[FORWARDED_FOR_HEADER] === undefined) return { client: plainAddress(ip), viaPeer: undefined };
  let who = vouched.get(req);
  if (who === undefined) vouched.set(req, (who = judgeForwarder(ip, req, vouch)));
  return who;
}

function judgeForwarder(
  ip: string,
  req: IncomingMessage,
  vouch: ForwarderCheck | undefined,
): { client: string; viaPeer: string | undefined } {
  const address = plainAddress(ip);
  const forwardedFor = first(req.headers[FORWARDED_FOR_HEADER]);
  if (forwardedFor === undefined || vouch === undefined) return { client: address, viaPeer: undefined };
  const byServer = first(req.headers[SERVER_FORWARD_HEADER]);
  const from = byServer ?? first(req.headers[FORWARDED_HEADER]);
  if (from === undefined) return { client: address, viaPeer: undefined };
  const client = forwardedFor.slice(0, 64);
  const fields = { client, from, method: req.method ?? '', path: req.url ?? '', bodyHash: first(req.headers[FORWARD_BODY_HEADER]) ?? '' };
  if (!vouch(req, { from, byServer: byServer !== undefined }, fields)) return { client: address, viaPeer: undefined };
  return { client, viaPeer: address };
}

/**
 * The client once the body is read: a forwarder's word holds only if the body is the one its
 * proof covers (a streamed upload is covered as such); else the socket's address.
 */
export function clientWithBody(
  ip: string,
  req: IncomingMessage,
  vouch: ForwarderCheck | undefined,
  body: unknown,
): { client: string; viaPeer: string | undefined } {
  const who = clientOf(ip, req, vouch);
  if (who.viaPeer === undefined) return who;
  const sent =
    typeof body === 'string' || Buffer.isBuffer(body)
      ? body
      : body !== null && typeof body === 'object' && typeof (body as { pipe?: unknown }).pipe === 'function'
        ? 'stream'
        : undefined;
  if (bodyHashOf(sent) === first(req.headers[FORWARD_BODY_HEADER])) return who;
  return { client: plainAddress(ip), viaPeer: undefined };
}

/**
 * Marks a write a follower sent to its datacenter's leader. Such a write is never sent
 * on to another server of the datacenter (a leader that changed meanwhile answers 503).
 */
export const SERVER_FORWARD_HEADER = 'x-service-forwarded-by-server';

type Query = Record<string, string | string[] | undefined>;

/** One query parameter; repeating a parameter is refused rather than guessed at. */
export function queryParam(request: FastifyRequest, name: string): string | undefined {
  const value = (request.query as Query)[name];
  if (Array.isArray(value)) throw invalid(`Invalid query: parameter ${JSON.stringify(name)} is given more than once`);
  return value;
}

/** Whether a flag-style parameter (`?expanded`, `?stale`) is present, whatever its value. */
export function queryFlag(request: FastifyRequest, name: string): boolean {
  return Object.hasOwn(request.query as Query, name);
}

type Headers = FastifyRequest['headers'];

function header(headers: Headers, name: string): string | undefined {
  const value = headers[name];
  const v = Array.isArray(value) ? value[0] : value;
  return v === undefined || v === '' ? undefined : v;
}

/** Namespace and partition a request points at outside its body: `?ns=` / `?partition=`, then the headers. */
export function hintsOf(nsParam: string | undefined, partitionParam: string | undefined, headers: Headers): ScopeHints {
  const namespace = nsParam || header(headers, 'x-service-namespace') || header(headers, 'x-consul-namespace');
  const partition = partitionParam || header(headers, 'x-service-partition') || header(headers, 'x-consul-partition');
  // Malformed names are refused on every route, even ones that do not use them.
  if (namespace && namespace !== WILDCARD) checkScopeName('namespace', namespace);
  if (partition) checkScopeName('partition', partition);
  return { ...(namespace ? { namespace } : {}), ...(partition ? { partition } : {}) };
}

/** The request's secret: `?token=`, X-Service-Token, X-Consul-Token, Authorization: Bearer; first non-empty wins. */
export function requestSecret(request: FastifyRequest): string | undefined {
  return secretOf(queryParam(request, 'token'), request.headers);
}

export function scopeHints(request: FastifyRequest): ScopeHints {
  return hintsOf(queryParam(request, 'ns'), queryParam(request, 'partition'), request.headers);
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Whether a forwarded request's sender proves to be a server (its forwarded requests name their original client). */
    forwarderCheck?: ForwarderCheck;
  }
}

/** The address a request counts against: its own, or the original client's when a proven server forwarded it. */
export function clientAddress(request: FastifyRequest): string {
  return clientWithBody(request.ip, request.raw, request.server.forwarderCheck, request.body).client;
}

/** The forwarding server's address when a proven server forwarded the request (its audit line's ViaAddr). */
export function viaAddress(request: FastifyRequest): string | undefined {
  return clientWithBody(request.ip, request.raw, request.server.forwarderCheck, request.body).viaPeer;
}

/** A path parameter of whatever route matched, when it has one by that name (for code shared by routes). */
export function pathParam(request: FastifyRequest, name: string): string | undefined {
  const params: unknown = request.params;
  if (typeof params !== 'object' || params === null) return undefined;
  const value: unknown = Reflect.get(params, name);
  return typeof value === 'string' ? value : undefined;
}
