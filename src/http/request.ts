import type { FastifyRequest } from 'fastify';
import { invalid } from '../domain/errors.js';
import type { RequestContext } from '../service/context.js';
import { type ScopeHints, WILDCARD, checkScopeName } from '../service/scope.js';

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

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  const v = Array.isArray(value) ? value[0] : value;
  return v === undefined || v === '' ? undefined : v;
}

/** The request's secret: `?token=`, X-Service-Token, X-Consul-Token, Authorization: Bearer; first non-empty wins. */
export function requestSecret(request: FastifyRequest): string | undefined {
  const fromQuery = queryParam(request, 'token');
  if (fromQuery) return fromQuery;
  const direct = header(request, 'x-service-token') ?? header(request, 'x-consul-token');
  if (direct) return direct;
  const auth = header(request, 'authorization');
  if (auth) {
    const m = /^Bearer\s+(.+)$/i.exec(auth.trim());
    if (m?.[1]) return m[1].trim();
  }
  return undefined;
}

export function scopeHints(request: FastifyRequest): ScopeHints {
  const namespace = queryParam(request, 'ns') || header(request, 'x-service-namespace') || header(request, 'x-consul-namespace');
  const partition = queryParam(request, 'partition') || header(request, 'x-service-partition') || header(request, 'x-consul-partition');
  // Malformed names are refused on every route, even ones that do not use them.
  if (namespace && namespace !== WILDCARD) checkScopeName('namespace', namespace);
  if (partition) checkScopeName('partition', partition);
  return { ...(namespace ? { namespace } : {}), ...(partition ? { partition } : {}) };
}

export function requestContext(request: FastifyRequest): RequestContext {
  const secret = requestSecret(request);
  return { ...(secret !== undefined ? { secret } : {}), hints: scopeHints(request), client: request.ip };
}
