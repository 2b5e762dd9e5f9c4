import type { FastifyReply, FastifyRequest } from 'fastify';
import { WatchwordError, invalid } from '../domain/errors.js';
import type { PeerClient, RelayedResponse } from '../replication/primary-client.js';
import { queryParam } from './request.js';

/**
 * How a write route is treated on a secondary: always sent to the primary; sent unless
 * the token it names is Local here; or sent when `global` says so of the request (which
 * decodes the body with the route's own decoder).
 */
export type ForwardRule = 'always' | 'token-by-id' | { global: (request: FastifyRequest) => boolean };

declare module 'fastify' {
  interface FastifyContextConfig {
    /** On a secondary, when this write goes to the primary. */
    forward?: ForwardRule;
  }
}

/**
 * Marks a request one daemon sent to another, naming the sender's datacenter. A marked
 * request is never forwarded again: a datacenter registered at the wrong address turns
 * into one refused request, not a storm.
 */
export const FORWARDED_HEADER = 'x-service-forwarded-from';

/**
 * The original client's address on a forwarded request, so the receiving daemon limits
 * each client on its own rather than all of a peer's traffic as one. Trusted only on
 * requests that come from a known peer daemon's address.
 */
export const FORWARDED_FOR_HEADER = 'x-service-forwarded-for';

/** An address as sockets report it, IPv4-mapped IPv6 unwrapped. */
export const plainAddress = (ip: string): string => ip.replace(/^::ffff:/, '');

/**
 * The client a request counts against: its address, or for a request a peer daemon
 * forwarded (trusted only from a peer's address), the original client's.
 */
export function clientOf(request: FastifyRequest, isPeer: ((ip: string) => boolean) | undefined): { client: string; viaPeer: string | undefined } {
  const ip = plainAddress(request.ip);
  const forwardedFor = request.headers[FORWARDED_FOR_HEADER];
  const forwarded = request.headers[FORWARDED_HEADER] !== undefined || request.headers[SERVER_FORWARD_HEADER] !== undefined;
  if (typeof forwardedFor === 'string' && forwarded && isPeer?.(ip)) return { client: forwardedFor.slice(0, 64), viaPeer: ip };
  return { client: ip, viaPeer: undefined };
}

/** Refuses to send on a request that another datacenter already forwarded here. */
export function refuseSecondHop(request: FastifyRequest, datacenter: string, target: string): void {
  const from = request.headers[FORWARDED_HEADER];
  if (from === undefined) return;
  throw new WatchwordError(
    'FORWARD_LOOP',
    `Request forwarded from datacenter ${JSON.stringify(String(from).slice(0, 64))} would be forwarded again from ${datacenter} to ${target}; requests are forwarded at most once (check the datacenters' addresses)`,
  );
}

/** Headers a forwarded request keeps: who is asking and where they point. */
const PASSED_HEADERS = ['x-service-token', 'x-consul-token', 'authorization', 'x-service-namespace', 'x-consul-namespace', 'x-service-partition', 'x-consul-partition'];

/** Response headers relayed back. */
const RELAYED_HEADERS = ['x-service-index', 'x-consul-index', 'x-service-knownleader', 'x-consul-knownleader', 'x-service-lastcontact', 'x-consul-lastcontact', 'x-service-effective-consistency', 'x-consul-effective-consistency', 'allow'];

/** The caller's headers named in `names` (first value of each), added to `into`. */
function passHeaders(request: FastifyRequest, names: readonly string[], into: Record<string, string>): Record<string, string> {
  for (const name of names) {
    const v = request.headers[name];
    const value = Array.isArray(v) ? v[0] : v;
    if (value) into[name] = value;
  }
  return into;
}

export function relayedRequest(request: FastifyRequest, from: string): { headers: Record<string, string>; body: string | undefined } {
  const headers = passHeaders(request, PASSED_HEADERS, { 'Content-Type': 'application/json', [FORWARDED_HEADER]: from, [FORWARDED_FOR_HEADER]: plainAddress(request.ip) });
  return { headers, body: typeof request.body === 'string' ? request.body : undefined };
}

export function relayResponse(reply: FastifyReply, res: RelayedResponse): FastifyReply {
  for (const name of RELAYED_HEADERS) {
    const v = res.headers.get(name);
    if (v !== null) void reply.header(name, v);
  }
  return reply.code(res.status).type(res.headers.get('content-type') ?? 'application/json; charset=utf-8').send(res.text);
}

/** What the HTTP layer needs of a daemon's place in the cluster. */
export interface ClusterHooks {
  datacenter: string;
  /** Address of a datacenter's daemon, when known. */
  addressOf(datacenter: string): string | undefined;
  peer(datacenter: string, address: string): PeerClient;
  /** Whether a connection from this address is another datacenter's daemon. */
  isPeer(ip: string): boolean;
  /** Set on secondaries only. */
  secondary?: SecondaryHooks;
  /** HA: set while this server is a follower of its datacenter's leader (writes go there). */
  follower?: () => FollowerHooks | undefined;
}

export interface FollowerHooks {
  leader: PeerClient;
  /** Resolves true once this server's store has reached `index`. */
  waitForIndex(index: number, timeoutMs: number): Promise<boolean>;
}

/**
 * Marks a write a follower sent to its datacenter's leader. Such a write is never sent
 * on to another server of the datacenter (a leader that changed meanwhile answers 503).
 */
export const SERVER_FORWARD_HEADER = 'x-service-forwarded-by-server';

/** Whether a request changes state (and so, at a follower, goes to the leader). */
export const isWrite = (method: string): boolean => method !== 'GET' && method !== 'HEAD' && method !== 'OPTIONS';

/**
 * A write at a follower: sent to the leader with the caller's credentials, answered once
 * this server has applied it (read-your-writes), or after APPLY_WAIT_MS with
 * `X-Service-Replication-Pending: true`.
 */
export async function forwardToLeader(request: FastifyRequest, reply: FastifyReply, hooks: FollowerHooks, server: string): Promise<FastifyReply> {
  if (request.headers[SERVER_FORWARD_HEADER] !== undefined) {
    throw new WatchwordError('NO_LEADER', 'this server is not the leader of its datacenter (the leader changed while the request was forwarded); try again');
  }
  // The caller's content type (a snapshot restore is not JSON) and any mark another datacenter set, kept.
  const headers = passHeaders(request, [...PASSED_HEADERS, 'content-type', FORWARDED_HEADER], { [SERVER_FORWARD_HEADER]: server, [FORWARDED_FOR_HEADER]: plainAddress(request.ip) });
  headers['content-type'] ??= 'application/json';
  // A snapshot upload arrives as a stream (never buffered here) and goes on as one.
  const raw = request.body as { pipe?: unknown } | undefined;
  const body = typeof request.body === 'string' ? request.body : Buffer.isBuffer(request.body) ? request.body : raw && typeof raw.pipe === 'function' ? (raw as NodeJS.ReadableStream) : undefined;
  // A streamed upload takes as long as the client sends it; a write answers within the usual bound.
  const res = await hooks.leader.request(request.method, request.url, headers, body, typeof body === 'object' && !Buffer.isBuffer(body) ? 10 * 60_000 : FORWARD_TIMEOUT_MS);
  if (res.status >= 200 && res.status < 300) {
    const index = Number(res.headers.get('x-service-index') ?? 0);
    if (index > 0 && !(await hooks.waitForIndex(index, APPLY_WAIT_MS))) {
      void reply.header('X-Service-Replication-Pending', 'true').header('X-Consul-Replication-Pending', 'true');
    }
  }
  return relayResponse(reply, res);
}

export interface SecondaryHooks {
  primary: PeerClient;
  /** Whether a Local token with this accessor lives here. */
  isLocalToken(accessorID: string): Promise<boolean>;
  waitForApplied(index: number, timeoutMs: number): Promise<boolean>;
  /** This datacenter's view of an object the primary just wrote, after it replicated. */
  localView(kind: 'token' | 'policy' | 'role', id: string): Promise<unknown | undefined>;
  currentIndex(): number;
}

/** A secondary waits this long for the primary's change to arrive before answering without it. */
export const APPLY_WAIT_MS = 5000;
/** A forwarded request gets this long to answer. */
export const FORWARD_TIMEOUT_MS = 4500;

/** `?dc=NAME`: sends the request to that datacenter's daemon and relays the answer. */
export async function forwardToDatacenter(request: FastifyRequest, reply: FastifyReply, cluster: ClusterHooks): Promise<FastifyReply | undefined> {
  const dc = queryParam(request, 'dc');
  if (!dc || dc === cluster.datacenter) return undefined;
  const address = cluster.addressOf(dc);
  if (!address) throw invalid(`No path to datacenter ${JSON.stringify(dc)}`);
  refuseSecondHop(request, cluster.datacenter, `datacenter ${dc}`);
  const { headers, body } = relayedRequest(request, cluster.datacenter);
  const res = await cluster.peer(dc, address).request(request.method, request.url, headers, body, FORWARD_TIMEOUT_MS);
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
  if (typeof rule === 'object') {
    try {
      return rule.global(request);
    } catch {
      // A body the route refuses: refused here, with the route's own message.
      return false;
    }
  }
  const id = (request.params as { AccessorID?: string }).AccessorID ?? '';
  return !(await hooks.isLocalToken(id));
}

/**
 * Sends a global write to the primary with the caller's own token, then answers once
 * the change has replicated here (read-your-writes). After APPLY_WAIT_MS it answers
 * with the primary's result and `X-Service-Replication-Pending: true`.
 */
export async function forwardWrite(request: FastifyRequest, reply: FastifyReply, hooks: SecondaryHooks, datacenter: string): Promise<FastifyReply> {
  refuseSecondHop(request, datacenter, 'the primary');
  const { headers, body } = relayedRequest(request, datacenter);
  const res = await hooks.primary.request(request.method, request.url, headers, body, FORWARD_TIMEOUT_MS);
  if (res.status < 200 || res.status >= 300) return relayResponse(reply, res);
  const index = Number(res.headers.get('x-service-index') ?? 0);
  const applied = await hooks.waitForApplied(index, APPLY_WAIT_MS);
  if (!applied) {
    void reply.header('X-Service-Replication-Pending', 'true').header('X-Consul-Replication-Pending', 'true');
    return relayResponse(reply, res);
  }
  let text = res.text;
  const kind = kindOf(request.url);
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

