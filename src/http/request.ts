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

type Headers = FastifyRequest['headers'];

function header(headers: Headers, name: string): string | undefined {
  const value = headers[name];
  const v = Array.isArray(value) ? value[0] : value;
  return v === undefined || v === '' ? undefined : v;
}

/** The secret a request carries: `?token=`, X-Service-Token, X-Consul-Token, Authorization: Bearer; first non-empty wins. */
export function secretOf(tokenParam: string | undefined, headers: Headers): string | undefined {
  if (tokenParam) return tokenParam;
  const direct = header(headers, 'x-service-token') ?? header(headers, 'x-consul-token');
  if (direct) return direct;
  const auth = header(headers, 'authorization');
  if (auth) {
    const m = /^Bearer\s+(.+)$/i.exec(auth.trim());
    if (m?.[1]) return m[1].trim();
  }
  return undefined;
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

export function requestContext(request: FastifyRequest): RequestContext {
  const secret = requestSecret(request);
  return { ...(secret !== undefined ? { secret } : {}), hints: scopeHints(request), client: request.ip };
}
