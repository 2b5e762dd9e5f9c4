import type { FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from 'fastify';
import type { z } from 'zod';
import { WatchwordError } from '../domain/errors.js';
import type { WatchTable } from '../store/store.js';
import type { ForwardRule } from './forward.js';
import { JSONText } from '../service/views.js';
import { sendError } from './pipeline.js';
import { type DirectAnswer, type DirectInput, type DirectSpec, Written } from './direct.js';
import type { ReadAccess, ReadGate } from './blocking.js';
import { queryParam } from './request.js';
import { requestContext } from './pipeline.js';
import { sendJSON, sendWrite } from './respond.js';

export type Method = 'GET' | 'PUT' | 'POST' | 'DELETE';

/** What the OpenAPI document says of a route; declared next to its handler. */
export interface RouteDoc {
  summary: string;
  /** The ACL permission the route checks. */
  permission: 'acl:read' | 'acl:write' | 'acl:write + operator:write' | 'operator:read' | 'operator:write' | 'agent:read' | 'none';
  body?: z.ZodType;
  /** The body may be left out (bootstrap, clone, preview). */
  bodyOptional?: boolean;
  response: z.ZodType;
  /** Content type of a non-JSON response. */
  responseType?: string;
  /** Route-specific query parameters, name to description. */
  query?: Record<string, string>;
}

/** The names of a route path's parameters: `:name` segments, and `*` for a trailing wildcard. */
type ParamNames<P extends string> = P extends `${string}:${infer Name}/${infer Rest}`
  ? Name | ParamNames<`/${Rest}`>
  : P extends `${string}:${infer Name}`
    ? Name
    : P extends `${string}*`
      ? '*'
      : never;

/** A route's decoded path parameters, typed from its path: `'/v1/acl/role/:id'` gives `{ id: string }`. */
export type ParamsOf<P extends string> = { [K in ParamNames<P>]: string };

/** A request to the route at path P, its parameters typed. */
export type RouteRequest<P extends string> = FastifyRequest<{ Params: ParamsOf<P> }> & { params: ParamsOf<P> };

/**
 * A route's logic, stated once. Fastify's handler is derived from it, and so is the fast path
 * (direct.ts) that serves the route's plain requests before Fastify's routing: one place for
 * what the route does, whichever door a request comes in by.
 */
export interface RouteLogic<P extends string = string> extends Pick<DirectSpec, 'query' | 'when' | 'admit'> {
  /** A read: served through the read gate on the route's `table` (blocking, consistency, shared work). */
  read?: { gate: Pick<ReadGate, 'serve'>; access: ReadAccess };
  /** Answers from the request's parts; throws a WatchwordError to refuse. */
  run(input: DirectInput<ParamsOf<P>>): DirectAnswer | Promise<DirectAnswer>;
}

/** A route: its logic (both doors), or a Fastify handler (routes the fast path never serves). */
export type RouteSpec<P extends string = string> = RouteBase &
  ({ logic: RouteLogic<P>; handler?: never } | { handler(request: RouteRequest<P>, reply: FastifyReply): Promise<unknown>; logic?: never });

interface RouteBase {
  /** The table a read watches: adds the index headers and allows blocking. */
  table?: WatchTable;
  /** On a secondary, when this write is sent to the primary. */
  forward?: ForwardRule;
  /** Runs before anything else of this route (before the body is read, before forwarding); a route stated as logic says it as `admit`. */
  onRequest?: (request: FastifyRequest, reply: FastifyReply) => Promise<void>;
  doc: RouteDoc;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Table whose index a GET reports in X-Service-Index. */
    table?: WatchTable;
    /** What the OpenAPI document says of the route (routes without one are not documented). */
    doc?: RouteDoc;
  }
}

const ALL_METHODS: HTTPMethods[] = ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT', 'OPTIONS'];

/**
 * Collects every documented route as it is registered, in any plugin registered after this
 * call (Fastify's onRoute hook): what the OpenAPI document is built from.
 */
export function documentedRoutes(app: FastifyInstance): RouteInfo[] {
  const routes: RouteInfo[] = [];
  app.addHook('onRoute', (options) => {
    const doc = options.config?.doc;
    if (doc === undefined) return;
    const methods = Array.isArray(options.method) ? options.method : [options.method];
    const table = options.config?.table;
    for (const method of methods) {
      if (method === 'HEAD') continue;
      routes.push({ method: method as Method, url: options.url, ...(table ? { table } : {}), doc });
    }
  });
  return routes;
}

/** Every registered route with its documentation (feeds the OpenAPI document). */
export interface RouteInfo {
  method: Method;
  url: string;
  table?: WatchTable;
  doc: RouteDoc;
}

/**
 * Registers a path's methods. Every other method on the same path answers 405 with
 * an Allow header, so a wrong method is told apart from a wrong path.
 */
export function resource<P extends string>(app: FastifyInstance, url: P, specs: Partial<Record<Method, RouteSpec<P>>>): void {
  const methods = Object.keys(specs) as Method[];
  for (const method of methods) {
    const spec = specs[method] as RouteSpec<P>;
    const handler = spec.logic ? handlerOf(url, spec.logic, spec.table) : spec.handler;
    const admit = spec.logic?.admit;
    const onRequest = admit ? async (request: FastifyRequest) => admit(requestContext(request)) : spec.onRequest;
    app.route({
      method,
      url,
      config: { doc: spec.doc, ...(spec.table ? { table: spec.table } : {}), ...(spec.forward ? { forward: spec.forward } : {}) },
      ...(onRequest ? { onRequest } : {}),
      // Fastify matched the path, so its parameters are those ParamsOf<P> names.
      handler: handler as (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>,
    });
    if (spec.logic) app.directRoutes.add(method, url, spec.logic as RouteLogic, spec.table);
  }
  const allowed = [...(methods.includes('GET') ? [...methods, 'HEAD'] : methods), 'OPTIONS'];
  const others = ALL_METHODS.filter((m) => !allowed.includes(m as Method));
  // OPTIONS answers with the methods the path serves, as Consul does.
  app.route({
    method: 'OPTIONS',
    url,
    handler: (_request, reply) => reply.header('Allow', allowed.join(', ')).code(200).send(),
  });
  app.route({
    method: others,
    url,
    handler: (request, reply) => {
      void reply.header('Allow', allowed.join(', '));
      return sendError(
        request,
        reply,
        new WatchwordError('METHOD_NOT_ALLOWED', `Method ${request.method} is not allowed on ${url}; allowed: ${allowed.join(', ')}`),
      );
    },
  });
}

/** Fastify's handler for a route stated as logic: the same input the fast path builds, the same answer. */
function handlerOf<P extends string>(
  url: P,
  logic: RouteLogic<P>,
  table: WatchTable | undefined,
): (request: RouteRequest<P>, reply: FastifyReply) => Promise<unknown> {
  const inputOf = (request: RouteRequest<P>): DirectInput<ParamsOf<P>> => {
    const query = new Map<string, string>();
    for (const name of logic.query ?? []) {
      const value = queryParam(request, name);
      if (value !== undefined) query.set(name, value);
    }
    return { ctx: requestContext(request), params: request.params, query, body: typeof request.body === 'string' ? request.body : '' };
  };
  // A string is JSON text already (the fast path sends it as it is).
  const asValue = (answer: DirectAnswer) => (typeof answer === 'string' ? new JSONText(answer) : answer);
  const { read } = logic;
  if (read) {
    if (table === undefined) throw new Error(`route ${url}: a read names the table it watches`);
    return (request, reply) => read.gate.serve(request, reply, table, read.access, async () => asValue(await logic.run(inputOf(request))));
  }
  return async (request, reply) => {
    const answer = await logic.run(inputOf(request));
    if (answer instanceof Written) return sendWrite(request, reply, answer);
    return sendJSON(request, reply, asValue(answer));
  };
}
