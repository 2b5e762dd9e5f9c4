import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, LogController } from 'fastify';
import { type Logger, pino } from 'pino';
import { BODY_LIMIT } from './body.js';
import { WatchwordError } from '../domain/errors.js';
import { RateLimiter } from '../transport/rate-limit.js';
import { z } from 'zod';
import { answered, refuseIfStale, sendError } from './pipeline.js';
import { openAPIDocument } from './openapi.js';
import { registerUI } from './ui.js';
import { sendJSON } from './respond.js';
import { documentedRoutes, resource } from './resource.js';
import type { RouteInfo } from './resource.js';
import { bootstrapRoutes } from './routes/bootstrap.js';
import { policyRoutes } from './routes/policies.js';
import { roleRoutes } from './routes/roles.js';
import { authMethodRoutes } from './routes/auth-methods.js';
import { quotaRoutes } from './routes/quotas.js';
import { inventoryRoutes } from './routes/inventory.js';
import { templatedPolicyRoutes } from './routes/templated-policies.js';
import { decisionRoutes } from './routes/decisions.js';
import { agentRoutes } from './routes/agent.js';
import { snapshotRoutes } from './routes/snapshot.js';
import type { AppDeps } from './deps.js';

export type { AppDeps, HttpLimits, SnapshotUploads } from './deps.js';
import { replicationRoutes } from './routes/replication.js';
import { clientOf, forwardToDatacenter, forwardToLeader, forwardWrite, isDryRun, isWrite, mustForward } from './forward.js';
import { tokenRoutes } from './routes/tokens.js';
import { DirectRoutes, IndexHeaders } from './direct.js';

function noSchemaCompiler(): never {
  throw new Error('routes decode their input with zod and write their own JSON: a Fastify schema is not compiled here');
}

/**
 * At most `cap` open connections from one address: one client cannot take every slot of
 * `http_max_conns`. A connection past it is closed before a byte is read.
 */
function capConnectionsPerClient(server: import('node:net').Server, limits: { maxConns?: number; maxConnsPerClient?: number }): void {
  const open = new Map<string, number>();
  let total = 0;
  server.on('connection', (socket: import('node:net').Socket) => {
    const client = socket.remoteAddress ?? '';
    const held = open.get(client) ?? 0;
    // Read at each connection: a reload (SIGHUP) changes them in place.
    const cap = limits.maxConnsPerClient ?? 0;
    const busy = (limits.maxConns ?? Number.POSITIVE_INFINITY) * BUSY_SHARE;
    // Past half the global cap, an address that already holds its fair share waits: a few
    // addresses cannot take every connection, and a new client still gets in.
    if ((cap > 0 && held + 1 > cap) || (total >= busy && held >= FAIR_SHARE_WHEN_BUSY)) {
      socket.destroy();
      return;
    }
    open.set(client, held + 1);
    total++;
    socket.once('close', () => {
      total--;
      const left = (open.get(client) ?? 1) - 1;
      if (left <= 0) open.delete(client);
      else open.set(client, left);
    });
  });
}

/** The share of http_max_conns past which each address may hold only FAIR_SHARE_WHEN_BUSY connections. */
const BUSY_SHARE = 0.5;
const FAIR_SHARE_WHEN_BUSY = 64;

/** 1 MiB: larger bodies get 413. */
export { BODY_LIMIT };

declare module 'fastify' {
  interface FastifyInstance {
    /** On reads of a table: the X-Service-Index family of headers to send, whatever the answer. */
    readHeaders(request: FastifyRequest): Record<string, string> | undefined;
  }
}

/**
 * Builds the HTTP API (never listens: the daemon or a test decides). Every route is
 * registered here, errors leave through one handler, and bodies are read as text so
 * that JSON is accepted whatever the Content-Type.
 */
export function buildApp(deps: AppDeps): { app: FastifyInstance; routes: RouteInfo[] } {
  const app = newInstance(deps);
  if (deps.limits) {
    app.server.maxConnections = deps.limits.maxConns;
    capConnectionsPerClient(app.server, deps.limits);
  }
  limitRates(app, deps);
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => done(null, body));
  serveDirectly(app, deps);
  // One metrics sample and one debug line per answer (pipeline.ts), whichever door.
  app.addHook('onResponse', (request, reply, done) => {
    answered(
      deps.metrics,
      request.log as unknown as Logger,
      request.method,
      request.routeOptions.url ?? 'unknown',
      reply.statusCode,
      reply.elapsedTime,
      () => String(request.id),
    );
    done();
  });
  if (deps.cluster) forwardWhereDue(app, deps.cluster);
  app.setErrorHandler((error, request, reply) => sendError(request, reply, error));
  app.setNotFoundHandler((request, reply) =>
    sendError(request, reply, new WatchwordError('NOT_FOUND', `No such endpoint: ${request.method} ${request.url.split('?')[0]}`)),
  );
  const routes = registerRoutes(app, deps);
  // The web UI: its own plugin context, so its security headers stay on its pages.
  void app.register(registerUI, { datacenter: deps.agent.datacenter });
  return { app, routes };
}

/** The Fastify instance with the limits a reload may change, no schema compilers, and errors answered by the pipeline. */
function newInstance(deps: AppDeps): FastifyInstance {
  const limits = deps.limits;
  const serverOptions = {
    ...(limits
      ? {
          headersTimeout: limits.headerTimeout,
          requestTimeout: limits.requestTimeout,
          // Node checks the request and header timeouts on this interval: keep it well under them.
          connectionsCheckingInterval: Math.max(100, Math.min(1000, Math.floor(limits.headerTimeout / 4))),
        }
      : {}),
  };
  // The https variant of the instance serves the same routes; only its listener differs.
  return Fastify({
    ...(deps.https ? { https: { ...deps.https, ...serverOptions } } : { http: serverOptions }),
    ...(limits
      ? {
          requestTimeout: limits.requestTimeout,
          keepAliveTimeout: limits.keepAliveTimeout,
          maxRequestsPerSocket: limits.maxRequestsPerConn,
        }
      : {}),
    loggerInstance: deps.logger ?? pino({ level: 'silent' }),
    // One line per request comes from the onResponse hook, without URLs or headers.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: BODY_LIMIT,
    requestIdHeader: false,
    return503OnClosing: true,
    routerOptions: { maxParamLength: 512 },
    // No child logger per request: the few lines a request logs carry its id themselves.
    childLoggerFactory: (logger) => logger,
    frameworkErrors: (error, request, reply) => {
      void sendError(request, reply, error);
    },
    // Routes decode their input with zod (resource.ts) and write their own JSON: no route
    // declares a Fastify schema, so Fastify's ajv and fast-json-stringify compilers are never
    // loaded (a tenth of a daemon's start-up). One that did would fail here, at start.
    schemaController: { compilersFactory: { buildValidator: noSchemaCompiler, buildSerializer: noSchemaCompiler } },
  }) as unknown as FastifyInstance;
}

/** With rate_limit set: each client (the original one, when a proven server forwarded it) and each forwarding server limited. */
function limitRates(app: FastifyInstance, deps: AppDeps): void {
  const rateLimit = deps.rateLimit;
  if (!rateLimit || rateLimit.rate <= 0) return;
  const limiter = new RateLimiter(rateLimit.rate, Math.max(1, rateLimit.burst));
  const peerLimiter = new RateLimiter(rateLimit.peerRate, Math.max(1, rateLimit.peerBurst));
  const refuse = (message: string, wait: number) => new WatchwordError('RATE_LIMITED', message, { retryAfter: wait });
  app.addHook('onRequest', async (request, reply) => {
    const { client, viaPeer } = clientOf(request.ip, request.raw, deps.cluster?.forwarderCheck);
    if (viaPeer !== undefined) {
      const wait = peerLimiter.take(`peer ${viaPeer}`);
      if (wait > 0)
        return sendError(
          request,
          reply,
          refuse(
            `Too many requests forwarded by the daemon at ${viaPeer}: the limit is ${rateLimit.peerRate} per second; retry in ${wait} s`,
            wait,
          ),
        );
    }
    const wait = limiter.take(client);
    if (wait === 0) return undefined;
    return sendError(
      request,
      reply,
      refuse(`Too many requests from ${client}: the limit is ${rateLimit.rate} per second; retry in ${wait} s`, wait),
    );
  });
}

/**
 * The hot paths' plain forms, served before Fastify's routing (direct.ts), and the index headers
 * of reads (errors included), added where replies are sent (sendJSONText, sendError): no hook
 * runs on every response for them.
 */
function serveDirectly(app: FastifyInstance, deps: AppDeps): void {
  const indexHeaders = new IndexHeaders();
  const direct = new DirectRoutes();
  app.decorate('directRoutes', direct);
  const cluster = deps.cluster;
  app.decorate('forwarderCheck', cluster?.forwarderCheck);
  app.decorate('auditRefusal', deps.auditRefusal);
  const { primaryEpoch, staleSeen } = deps;
  if (primaryEpoch) {
    // A stale primary takes no forwarded write, whichever door it comes in by (the direct path checks it too).
    app.addHook('onRequest', async (request) => refuseIfStale(request.method, request.headers, primaryEpoch, staleSeen));
  }
  direct.install(app, {
    ...(primaryEpoch ? { primaryEpoch } : {}),
    ...(staleSeen ? { staleSeen } : {}),
    store: deps.store,
    agent: deps.agent,
    metrics: deps.metrics,
    indexHeaders,
    rateLimited: (deps.rateLimit?.rate ?? 0) > 0,
    ...(deps.auditRefusal ? { auditRefusal: deps.auditRefusal } : {}),
    ...(cluster ? { forwarderCheck: cluster.forwarderCheck } : {}),
  });
  app.decorate('readHeaders', (request: FastifyRequest): Record<string, string> | undefined => {
    const table = request.routeOptions.config?.table;
    if (table === undefined || (request.method !== 'GET' && request.method !== 'HEAD')) return undefined;
    const consistency = request.consistency === 'consistent' ? 'consistent' : request.consistency === 'stale' ? 'stale' : 'leader';
    return indexHeaders.get(
      Math.max(1, request.watchIndex ?? deps.store.tableIndex(table)),
      deps.agent.knownLeader(),
      deps.agent.lastContactMs(),
      consistency,
    );
  });
}

/** Requests this server does not answer itself, sent where they must go: `?dc=`, a follower's writes, a secondary's global writes. */
function forwardWhereDue(app: FastifyInstance, cluster: NonNullable<AppDeps['cluster']>): void {
  const forward = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> => {
    // ?dc= reaches another datacenter's ACL and operator endpoints (the web UI's Datacenters page asks each for its primary).
    const url = request.routeOptions.url ?? '';
    if (url.startsWith('/v1/acl/') || url.startsWith('/v1/operator/')) {
      const relayed = await forwardToDatacenter(request, reply, cluster);
      if (relayed) return relayed;
    }
    // A dry run writes nothing: answered here, from this server's recent checks.
    if (isDryRun(request)) return undefined;
    const rule = request.routeOptions.config?.forward;
    if (rule === 'here') return undefined;
    const follower = cluster.follower?.();
    if (follower && isWrite(request.method) && !(request.routeOptions.url ?? '').startsWith('/v1/internal/')) {
      return forwardToLeader(request, reply, follower, cluster.datacenter, cluster.forwardProof);
    }
    const secondary = cluster.secondary;
    if (rule && secondary && (await mustForward(request, rule, secondary)))
      return forwardWrite(request, reply, secondary, cluster.datacenter, cluster.forwardProof);
    return undefined;
  };
  app.addHook('preHandler', (request, reply, done) => {
    // Most requests stay here: no ?dc= and no write a secondary sends on.
    const dc = (request.query as Record<string, unknown>).dc;
    const here = dc === undefined || dc === '' || dc === cluster.datacenter;
    const rule = request.routeOptions.config?.forward;
    if (here && (rule === 'here' || (!(cluster.secondary && rule) && !(cluster.follower && isWrite(request.method) && cluster.follower()))))
      return done();
    forward(request, reply).then(
      (relayed) => {
        if (!relayed) done();
      },
      (err: unknown) => done(err as Error),
    );
  });
}

/** Every group of routes, a plugin given only what it uses, and the OpenAPI document of them all. */
function registerRoutes(app: FastifyInstance, deps: AppDeps): RouteInfo[] {
  const routes = documentedRoutes(app);
  const pick = <K extends keyof AppDeps>(...keys: K[]): Pick<AppDeps, K> =>
    Object.fromEntries(keys.filter((k) => deps[k] !== undefined).map((k) => [k, deps[k]])) as Pick<AppDeps, K>;
  void app.register(bootstrapRoutes, pick('bootstrap'));
  void app.register(tokenRoutes, pick('tokens', 'agent', 'reads', 'cluster'));
  void app.register(policyRoutes, pick('policies', 'reads', 'dryRun'));
  void app.register(roleRoutes, pick('roles', 'reads', 'dryRun'));
  void app.register(templatedPolicyRoutes, pick('templatedPolicies'));
  void app.register(decisionRoutes, pick('decisions', 'whoCan', 'metrics', 'reads'));
  void app.register(authMethodRoutes, pick('authMethods', 'bindingRules', 'login', 'cluster', 'loginRate', 'reads', 'store'));
  void app.register(quotaRoutes, pick('quotas', 'reads', 'store'));
  void app.register(inventoryRoutes, pick('inventory'));
  void app.register(agentRoutes, pick('agent', 'metrics', 'resolver', 'audit', 'cluster'));
  void app.register(snapshotRoutes, pick('snapshots', 'snapshotUploads'));
  void app.register(replicationRoutes, pick('cluster', 'replicationStatus', 'replicationHistory', 'store'));
  // Built on first request, when every route (this one included) is registered.
  let document: Record<string, unknown> | undefined;
  resource(app, '/v1/openapi.json', {
    GET: {
      doc: { summary: 'This OpenAPI document', permission: 'none', response: z.record(z.string(), z.unknown()) },
      handler: async (request, reply) => sendJSON(request, reply, (document ??= openAPIDocument(routes, deps.agent.version))),
    },
  });
  return routes;
}
