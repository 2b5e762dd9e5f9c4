import type { FastifyReply, FastifyRequest } from 'fastify';
import { WatchwordError, invalid } from '../domain/errors.js';
import { FORWARD_BODY_HEADER, FORWARD_PROOF_HEADER, bodyHashOf } from '../transport/forward-proof.js';
import type { RelayedResponse } from '../transport/peer-client.js';
import type { ClusterHooks, FollowerHooks, SecondaryHooks } from '../ha/hooks.js';

export type { ClusterHooks, FollowerHooks, SecondaryHooks } from '../ha/hooks.js';
import { clientAddress, pathParam, queryParam } from './request.js';
import { PRIMARY_EPOCH_HEADER } from './pipeline.js';

/**
 * How a write route is treated on a secondary: always sent to the primary; sent unless
 * the token it names is Local here; or sent when `global` says so of the request (which
 * decodes the body with the route's own decoder). `here`: answered by the server asked, at a
 * follower too (it acts through the datacenter's coordinator, not its store).
 */
export type ForwardRule = 'always' | 'token-by-id' | 'here' | { global: (request: FastifyRequest) => boolean };

declare module 'fastify' {
  interface FastifyContextConfig {
    /** On a secondary, when this write goes to the primary. */
    forward?: ForwardRule;
  }
}

export { FORWARDED_FOR_HEADER, FORWARDED_HEADER, SERVER_FORWARD_HEADER, clientOf, plainAddress } from './request.js';
import { FORWARDED_FOR_HEADER, FORWARDED_HEADER, SERVER_FORWARD_HEADER } from './request.js';

/**
 * Whether this server makes writes itself right now: not a secondary (whose global writes go to the
 * primary) nor a follower (whose writes go to its leader). The direct path takes a write only then;
 * otherwise Fastify's route forwards it.
 */
export const writesHere = (cluster: ClusterHooks | undefined): boolean =>
  cluster === undefined || (cluster.secondary === undefined && cluster.follower?.() === undefined);

/** A write asked only to say what it would do (`?dry-run`): never sent on to a leader or the primary. */
export const isDryRun = (request: FastifyRequest): boolean => Object.hasOwn(request.query as object, 'dry-run');

/** Refuses to send on a request that another datacenter already forwarded here. */
export function refuseSecondHop(request: FastifyRequest, datacenter: string, target: string): void {
  const from = request.headers[FORWARDED_HEADER];
  if (from === undefined) return;
  throw new WatchwordError(
    'FORWARD_LOOP',
    `Request forwarded from datacenter ${JSON.stringify(String(from).slice(0, 64))} would be forwarded again from ${datacenter} to ` +
      `${target}; requests are forwarded at most once (check the datacenters' addresses)`,
  );
}

/** Headers a forwarded request keeps: who is asking and where they point. */
const PASSED_HEADERS = [
  'x-service-token',
  'x-consul-token',
  'authorization',
  'x-service-namespace',
  'x-consul-namespace',
  'x-service-partition',
  'x-consul-partition',
  'accept',
];

/** Response headers relayed back. */
const RELAYED_HEADERS = [
  'x-service-error-code',
  'x-service-index',
  'x-consul-index',
  'x-service-knownleader',
  'x-consul-knownleader',
  'x-service-lastcontact',
  'x-consul-lastcontact',
  'x-service-effective-consistency',
  'x-consul-effective-consistency',
  'allow',
  // When to try again (a rate limit, a primary handing its role over).
  'retry-after',
];

/** The caller's headers named in `names` (first value of each), added to `into`. */
function passHeaders(request: FastifyRequest, names: readonly string[], into: Record<string, string>): Record<string, string> {
  for (const name of names) {
    const v = request.headers[name];
    const value = Array.isArray(v) ? v[0] : v;
    if (value) into[name] = value;
  }
  return into;
}

/** A path parameter re-encoded whole: slashes and dots too, so it stays one parameter of the same route there. */
const encodeParam = (value: string): string => encodeURIComponent(value).replace(/\./g, '%2E');

/**
 * The path and query a relayed request asks for at another server: rebuilt from the route that
 * matched here and its decoded parameters, each encoded again, never the raw URL. Dot segments
 * or encoded slashes in what the caller sent therefore reach the same route there, not another
 * endpoint (`/v1/acl/policy/name/../../../agent/self?dc=dc2` is a policy name there too).
 */
export function relayPath(request: FastifyRequest): string {
  const pattern = request.routeOptions.url;
  if (pattern === undefined) throw new WatchwordError('NOT_FOUND', `No such endpoint: ${request.method}`);
  const params = (request.params ?? {}) as Record<string, string | undefined>;
  const path = pattern.replace(/:(\w+)|\*/g, (_m, name: string | undefined) => encodeParam(params[name ?? '*'] ?? ''));
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries((request.query ?? {}) as Record<string, string | string[] | undefined>)) {
    for (const v of Array.isArray(value) ? value : [value]) if (v !== undefined) query.append(key, v);
  }
  const search = query.toString();
  return search ? `${path}?${search}` : path;
}

/**
 * The headers that name the original client (the one this server was told of by a proven
 * forwarder, else its socket's), with this server's proof of them, covering the path and the
 * body sent, when it holds a key to prove with.
 */
function forwardedFor(
  request: FastifyRequest,
  mark: string,
  from: string,
  prove: ClusterHooks['forwardProof'],
  to: { byServer: boolean; datacenter: string },
  body: string | Buffer | NodeJS.ReadableStream | undefined,
): Record<string, string> {
  const client = clientAddress(request);
  const bodyHash = bodyHashOf(typeof body === 'string' || Buffer.isBuffer(body) || body === undefined ? body : 'stream');
  const proof = prove({ client, from, method: request.method, path: relayPath(request), bodyHash }, to);
  return {
    [mark]: from,
    [FORWARDED_FOR_HEADER]: client,
    [FORWARD_BODY_HEADER]: bodyHash,
    ...(proof !== undefined ? { [FORWARD_PROOF_HEADER]: proof } : {}),
  };
}

/** A request relayed to datacenter `to` (a global write to the primary, a `?dc=` read): its headers and body. */
export function relayedRequest(
  request: FastifyRequest,
  from: string,
  prove: ClusterHooks['forwardProof'],
  to: string,
): { headers: Record<string, string>; body: string | undefined } {
  const body = typeof request.body === 'string' ? request.body : undefined;
  const headers = passHeaders(request, PASSED_HEADERS, {
    'Content-Type': 'application/json',
    ...forwardedFor(request, FORWARDED_HEADER, from, prove, { byServer: false, datacenter: to }, body),
  });
  return { headers, body };
}

export function relayResponse(reply: FastifyReply, res: RelayedResponse): FastifyReply {
  for (const name of RELAYED_HEADERS) {
    const v = res.headers.get(name);
    if (v !== null) void reply.header(name, v);
  }
  return reply
    .code(res.status)
    .type(res.headers.get('content-type') ?? 'application/json; charset=utf-8')
    .send(res.text);
}

/** Whether a request changes state (and so, at a follower, goes to the leader). */
export const isWrite = (method: string): boolean => method !== 'GET' && method !== 'HEAD' && method !== 'OPTIONS';

/**
 * A write at a follower: sent to the leader with the caller's credentials, answered once
 * this server has applied it (read-your-writes), or after APPLY_WAIT_MS with
 * `X-Service-Replication-Pending: true`.
 */
export async function forwardToLeader(
  request: FastifyRequest,
  reply: FastifyReply,
  hooks: FollowerHooks,
  server: string,
  prove: ClusterHooks['forwardProof'],
): Promise<FastifyReply> {
  if (request.headers[SERVER_FORWARD_HEADER] !== undefined) {
    throw new WatchwordError(
      'NO_LEADER',
      'this server is not the leader of its datacenter (the leader changed while the request was forwarded); try again',
    );
  }
  // A snapshot upload arrives as a stream (never buffered here) and goes on as one.
  const raw = request.body as { pipe?: unknown } | undefined;
  const body =
    typeof request.body === 'string'
      ? request.body
      : Buffer.isBuffer(request.body)
        ? request.body
        : raw && typeof raw.pipe === 'function'
          ? (raw as NodeJS.ReadableStream)
          : undefined;
  // The caller's content type (a snapshot restore is not JSON) and any mark another datacenter set, kept.
  const headers = passHeaders(
    request,
    [...PASSED_HEADERS, 'content-type', FORWARDED_HEADER],
    forwardedFor(request, SERVER_FORWARD_HEADER, server, prove, { byServer: true, datacenter: server }, body),
  );
  headers['content-type'] ??= 'application/json';
  const arrival = hooks.sending();
  // A streamed upload takes as long as the client sends it; a write answers within the usual bound.
  const res = await hooks.leader.request(
    request.method,
    relayPath(request),
    headers,
    body,
    typeof body === 'object' && !Buffer.isBuffer(body) ? 10 * 60_000 : FORWARD_TIMEOUT_MS,
  );
  if (res.status >= 200 && res.status < 300) {
    const index = Number(res.headers.get('x-service-index') ?? 0);
    const arrived = index > 0 ? await arrival(index, APPLY_WAIT_MS) : 'applied';
    if (arrived === 'unknown') throw leftUnknown('the leader of this datacenter');
    if (arrived === 'pending') void reply.header('X-Service-Replication-Pending', 'true').header('X-Consul-Replication-Pending', 'true');
  }
  return relayResponse(reply, res);
}

/**
 * A read whose answer is the leader's (what it keeps for the whole datacenter): at a follower,
 * relayed to its proven leader, as Consul forwards the RPC. Undefined when this server answers
 * itself: it leads, knows no leader, was asked by another server, or the leader did not answer
 * (then `failed` is told why).
 */
export async function relayToLeader(
  request: FastifyRequest,
  reply: FastifyReply,
  cluster: ClusterHooks | undefined,
  failed?: (err: unknown) => void,
): Promise<FastifyReply | undefined> {
  if (!cluster || request.headers[SERVER_FORWARD_HEADER] !== undefined) return undefined;
  let follower: FollowerHooks | undefined;
  try {
    follower = cluster.follower?.();
  } catch {
    return undefined;
  }
  if (!follower) return undefined;
  try {
    return await forwardToLeader(request, reply, follower, cluster.datacenter, cluster.forwardProof);
  } catch (err) {
    failed?.(err);
    return undefined;
  }
}

/**
 * An acknowledgement from a leader of a release that took writes while it stopped, whose stream
 * ended before the write came over it (ha/hooks.ts, Arrival): it may be a write its successor
 * never holds. The caller is told the outcome is unknown, as for any write a failover cut short.
 */
const leftUnknown = (who: string): WatchwordError =>
  new WatchwordError(
    'NO_LEADER',
    `${who} acknowledged this write but stopped leading before the write reached this server; its release acknowledges ` +
      'writes while it stops that its successor may not hold, so whether the write was kept is unknown: read it back before trying again',
  );

/** A secondary waits this long for the primary's change to arrive before answering without it. */
export const APPLY_WAIT_MS = 5000;
/** A forwarded request gets this long to answer. */
export const FORWARD_TIMEOUT_MS = 4500;

/** `?dc=NAME`: sends the request to that datacenter's daemon and relays the answer. */
export async function forwardToDatacenter(
  request: FastifyRequest,
  reply: FastifyReply,
  cluster: ClusterHooks,
): Promise<FastifyReply | undefined> {
  const dc = queryParam(request, 'dc');
  if (!dc || dc === cluster.datacenter) return undefined;
  const address = cluster.addressOf(dc);
  if (!address) throw invalid(`No path to datacenter ${JSON.stringify(dc)}`);
  refuseSecondHop(request, cluster.datacenter, `datacenter ${dc}`);
  const { headers, body } = relayedRequest(request, cluster.datacenter, cluster.forwardProof, dc);
  // `dc` goes along: a daemon that is not that datacenter refuses to send it on (FORWARD_LOOP).
  const res = await cluster.peer(dc, address).request(request.method, relayPath(request), headers, body, FORWARD_TIMEOUT_MS);
  return relayResponse(reply, res);
}

function kindOf(url: string): 'token' | 'policy' | 'role' | undefined {
  if (url.startsWith('/v1/acl/token')) return 'token';
  if (url.startsWith('/v1/acl/policy')) return 'policy';
  if (url.startsWith('/v1/acl/role')) return 'role';
  return undefined;
}

/** Whether this write must go to the primary. */
export async function mustForward(request: FastifyRequest, rule: ForwardRule, hooks: SecondaryHooks): Promise<boolean> {
  if (rule === 'always') return true;
  if (rule === 'here') return false;
  if (typeof rule === 'object') {
    try {
      return rule.global(request);
    } catch {
      // A body the route refuses: refused here, with the route's own message.
      return false;
    }
  }
  const id = pathParam(request, 'AccessorID') ?? '';
  return !(await hooks.isLocalToken(id));
}

/**
 * Sends a global write to the primary with the caller's own token, then answers once
 * the change has replicated here (read-your-writes). After APPLY_WAIT_MS it answers
 * with the primary's result and `X-Service-Replication-Pending: true`.
 */
export async function forwardWrite(
  request: FastifyRequest,
  reply: FastifyReply,
  hooks: SecondaryHooks,
  datacenter: string,
  prove: ClusterHooks['forwardProof'],
): Promise<FastifyReply> {
  refuseSecondHop(request, datacenter, 'the primary');
  const { headers, body } = relayedRequest(request, datacenter, prove, hooks.primary.datacenter);
  // The highest primary epoch seen here: a primary behind it is stale and refuses the write.
  headers[PRIMARY_EPOCH_HEADER] = String(hooks.epochSeen());
  const arrival = hooks.sending();
  const res = await hooks.primary.request(request.method, relayPath(request), headers, body, FORWARD_TIMEOUT_MS);
  if (res.status < 200 || res.status >= 300) return relayResponse(reply, res);
  const index = Number(res.headers.get('x-service-index') ?? 0);
  const arrived = await arrival(index, APPLY_WAIT_MS);
  if (arrived === 'unknown') throw leftUnknown(`the primary datacenter's leader`);
  if (arrived === 'pending') {
    void reply.header('X-Service-Replication-Pending', 'true').header('X-Consul-Replication-Pending', 'true');
    return relayResponse(reply, res);
  }
  let text = res.text;
  const kind = kindOf(request.routeOptions.url ?? '');
  try {
    const value = JSON.parse(res.text) as unknown;
    if (kind && value !== null && typeof value === 'object') {
      const id = (value as { AccessorID?: string; ID?: string }).AccessorID ?? (value as { ID?: string }).ID;
      const local = id ? await hooks.localView(kind, id) : undefined;
      if (local !== undefined) text = JSON.stringify(local);
    }
  } catch {
    // Not JSON: relay as is.
  }
  const localIndex = Math.max(1, hooks.currentIndex());
  void reply.header('X-Service-Index', localIndex).header('X-Consul-Index', localIndex);
  return reply.code(res.status).type('application/json; charset=utf-8').send(text);
}
