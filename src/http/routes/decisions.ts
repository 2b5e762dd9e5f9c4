import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { answersJSON } from '../../service/decisions.js';
import { JSONText } from '../../service/views.js';
import { BODY_LIMIT, parseJsonBody } from '../body.js';
import { STATUS, errorBody, toWatchwordError } from '../errors.js';
import { hintsOf, queryParam, requestContext, secretOf } from '../request.js';
import { sendJSON } from '../respond.js';
import { type RouteSpec, resource } from '../routes.js';
import { authorizeBody, authorizeResponse, tokenAuthorizerResponse } from '../../api/schemas.js';
import { invalid } from '../../domain/errors.js';
import { blockingParams } from '../blocking.js';
import type { AppDeps } from '../deps.js';

const PATH = '/v1/internal/acl/authorize';
/** Query parameters the direct path understands; any other sends the request through Fastify. */
const DIRECT_PARAMS = new Set(['token', 'ns', 'partition']);

/** POST (and PUT) /v1/internal/acl/authorize: may the request's token do each of these? (SPEC §17) */
/** What the decision routes use. */
export type DecisionRoutesDeps = Pick<AppDeps, 'decisions' | 'metrics' | 'rateLimit' | 'reads'>;

export async function decisionRoutes(app: FastifyInstance, deps: DecisionRoutesDeps): Promise<void> {
  const allowed = deps.metrics.authorizeChecks.labels({ allowed: 'true' });
  const denied = deps.metrics.authorizeChecks.labels({ allowed: 'false' });
  const count = (allows: readonly boolean[]) => {
    let yes = 0;
    for (const a of allows) if (a) yes++;
    if (yes > 0) allowed.inc(yes);
    if (allows.length > yes) denied.inc(allows.length - yes);
  };
  const spec: RouteSpec = {
    doc: {
      summary: "Judge 1 to 64 checks {Resource, Segment, Access} for the request's token; the same array back with Allow",
      permission: 'none',
      body: authorizeBody,
      response: authorizeResponse,
    },
    handler: async (request: FastifyRequest, reply: FastifyReply) => {
      const { checks, allows } = await deps.decisions.authorize(requestContext(request), parseJsonBody(request.body));
      count(allows);
      return sendJSON(request, reply, new JSONText(answersJSON(checks, allows)));
    },
  };
  resource(app, PATH, { POST: spec, PUT: spec });
  directPath(app, deps, count);

  resource(
    app,
    '/v1/internal/acl/authorizer',
    {
      GET: {
        doc: {
          summary: "The request's own token as an enforcing client compiles it: place, expiry, default policy and the rules of every policy that applies here. Blocks with ?hash= until that changes",
          permission: 'none',
          response: tokenAuthorizerResponse,
          query: { hash: 'Blocking: answer once the content hash differs from this one (X-Service-ContentHash of the last answer), or the wait runs out', wait: 'Longest wait with ?hash= (default 5m, at most 10m)' },
        },
        handler: async (request, reply) => {
          const ctx = requestContext(request);
          const { wait } = blockingParams(request);
          const hash = queryParam(request, 'hash');
          if (hash !== undefined && hash !== '' && !/^[0-9a-f]{1,64}$/.test(hash)) throw invalid('Invalid hash: expected the X-Service-ContentHash of an earlier answer');
          let answer = await deps.decisions.tokenAuthorizer(ctx);
          if (hash && answer.hash === hash) {
            await deps.reads.hold(request, reply, wait, (signal) => deps.decisions.waitForChange(ctx, hash, signal));
            answer = await deps.decisions.tokenAuthorizer(ctx);
          }
          void reply.header('X-Service-ContentHash', answer.hash).header('X-Consul-ContentHash', answer.hash);
          return sendJSON(request, reply, answer.view);
        },
      },
    }
  );
}

/**
 * Decisions are the hottest path a service calls, so the plain form of the request is served
 * before Fastify's routing: a POST or PUT of a body of known length to the exact path, with
 * at most `token`, `ns` and `partition` in the query, while no per-client rate limit is set.
 * It runs the same service, answers the same bytes and errors, and is measured and logged
 * like every route; anything else (`?pretty`, a chunked body, a body over the limit, a server
 * closing) takes the Fastify route above.
 */
function directPath(app: FastifyInstance, deps: DecisionRoutesDeps, count: (allows: readonly boolean[]) => void): void {
  if (deps.rateLimit && deps.rateLimit.rate > 0) return;
  const server = app.server;
  const [viaFastify] = server.listeners('request') as Array<(req: IncomingMessage, res: ServerResponse) => void>;
  if (viaFastify === undefined) return;
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  server.removeListener('request', viaFastify);
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const query = closing ? undefined : directQuery(req);
    if (query === undefined) return viaFastify(req, res);
    serve(req, res, query);
  });

  const log = app.log as unknown as Logger;
  function finish(req: IncomingMessage, res: ServerResponse, started: number, status: number, text: string, retryAfter?: number): void {
    const headers: Record<string, string | number> = { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) };
    if (retryAfter !== undefined) headers['retry-after'] = String(retryAfter);
    res.writeHead(status, headers);
    res.end(text);
    const seconds = (performance.now() - started) / 1000;
    deps.metrics.observeRequest(req.method as string, PATH, status, seconds);
    if (log.isLevelEnabled('debug')) log.debug({ method: req.method, route: PATH, status, durationMs: Math.round(seconds * 100_000) / 100 }, 'request');
  }

  function fail(req: IncomingMessage, res: ServerResponse, started: number, err: unknown): void {
    const e = toWatchwordError(err);
    if (e.code === 'INTERNAL') log.error({ err: e.cause ?? e }, 'request failed with an internal error');
    const message = e.code === 'INTERNAL' ? 'internal error' : e.message;
    finish(req, res, started, STATUS[e.code], JSON.stringify(errorBody(e.code, message)), e.retryAfter);
  }

  function serve(req: IncomingMessage, res: ServerResponse, query: Map<string, string>): void {
    const started = performance.now();
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('error', () => res.destroy());
    req.on('end', () => {
      try {
        const text = chunks.length === 1 ? (chunks[0] as Buffer).toString('utf8') : Buffer.concat(chunks).toString('utf8');
        const ctx = {
          hints: hintsOf(query.get('ns'), query.get('partition'), req.headers),
          client: req.socket.remoteAddress,
          ...optionalSecret(secretOf(query.get('token'), req.headers)),
        };
        const result = deps.decisions.authorize(ctx, parseJsonBody(text));
        const answer = (r: { checks: Parameters<typeof answersJSON>[0]; allows: boolean[] }) => {
          count(r.allows);
          finish(req, res, started, 200, answersJSON(r.checks, r.allows));
        };
        if (result instanceof Promise) result.then(answer, (err: unknown) => fail(req, res, started, err));
        else answer(result);
      } catch (err) {
        fail(req, res, started, err);
      }
    });
  }
}

const optionalSecret = (secret: string | undefined): { secret?: string } => (secret === undefined ? {} : { secret });

/** The query of a request the direct path takes, or undefined when Fastify should serve it. */
function directQuery(req: IncomingMessage): Map<string, string> | undefined {
  const method = req.method;
  if (method !== 'POST' && method !== 'PUT') return undefined;
  const url = req.url ?? '';
  if (!url.startsWith(PATH)) return undefined;
  if (url.length !== PATH.length && url.charCodeAt(PATH.length) !== 63 /* ? */) return undefined;
  const length = req.headers['content-length'];
  if (length === undefined || req.headers['transfer-encoding'] !== undefined || !(Number(length) <= BODY_LIMIT)) return undefined;
  const query = new Map<string, string>();
  if (url.length > PATH.length + 1) {
    for (const [key, value] of new URLSearchParams(url.slice(PATH.length + 1))) {
      if (!DIRECT_PARAMS.has(key) || query.has(key)) return undefined;
      query.set(key, value);
    }
  }
  return query;
}
