import type { FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from 'fastify';
import { WatchwordError } from '../domain/errors.js';
import type { WatchTable } from '../store/store.js';
import { sendError } from './errors.js';

export type Method = 'GET' | 'PUT' | 'POST' | 'DELETE';

export interface RouteSpec {
  handler(request: FastifyRequest, reply: FastifyReply): Promise<unknown>;
  /** The table a read watches: adds the index headers and allows blocking. */
  table?: WatchTable;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Table whose index a GET reports in X-Service-Index. */
    table?: WatchTable;
  }
}

const ALL_METHODS: HTTPMethods[] = ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT', 'OPTIONS'];

/** Documentation of every registered route (feeds the OpenAPI document). */
export interface RouteInfo {
  method: Method;
  url: string;
}

/**
 * Registers a path's methods. Every other method on the same path answers 405 with
 * an Allow header, so a wrong method is told apart from a wrong path.
 */
export function resource(app: FastifyInstance, url: string, specs: Partial<Record<Method, RouteSpec>>, registry?: RouteInfo[]): void {
  const methods = Object.keys(specs) as Method[];
  for (const method of methods) {
    const spec = specs[method] as RouteSpec;
    registry?.push({ method, url });
    app.route({
      method,
      url,
      ...(spec.table ? { config: { table: spec.table } } : {}),
      handler: spec.handler,
    });
  }
  const allowed = methods.includes('GET') ? [...methods, 'HEAD'] : methods;
  const others = ALL_METHODS.filter((m) => !allowed.includes(m as Method));
  app.route({
    method: others,
    url,
    handler: (request, reply) => {
      void reply.header('Allow', allowed.join(', '));
      return sendError(request, reply, new WatchwordError('METHOD_NOT_ALLOWED', `Method ${request.method} is not allowed on ${url}; allowed: ${allowed.join(', ')}`));
    },
  });
}
