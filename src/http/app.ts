import type { ReplicationStatusResponse } from '../api/schemas.js';
import type { AclResolver } from '../service/acl-resolver.js';
import type { ServerOptions as HttpsServerOptions } from 'node:https';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest, LogController } from 'fastify';
import { type Logger, pino } from 'pino';
import { BODY_LIMIT } from './body.js';
import { WatchwordError } from '../domain/errors.js';
import type { BootstrapService } from '../service/bootstrap.js';
import type { SnapshotService } from '../service/snapshots.js';
import type { PolicyService } from '../service/policies.js';
import type { RoleService } from '../service/roles.js';
import type { TemplatedPolicyService } from '../service/templated-policies.js';
import type { DecisionService } from '../service/decisions.js';
import type { AgentInfo } from '../service/context.js';
import type { TokenService } from '../service/tokens.js';
import type { Store } from '../store/store.js';
import type { Metrics } from '../observability/metrics.js';
import type { ReadGate } from './blocking.js';
import { RateLimiter } from './rate-limit.js';
import { z } from 'zod';
import { sendError } from './errors.js';
import { openAPIDocument } from './openapi.js';
import { registerUI } from './ui.js';
import { sendJSON } from './respond.js';
import { resource } from './routes.js';
import type { RouteInfo } from './routes.js';
import { bootstrapRoutes } from './routes/bootstrap.js';
import { policyRoutes } from './routes/policies.js';
import { roleRoutes } from './routes/roles.js';
import { authMethodRoutes } from './routes/auth-methods.js';
import type { AuthMethodService, BindingRuleService, LoginService } from '../service/auth-methods.js';
import { templatedPolicyRoutes } from './routes/templated-policies.js';
import { decisionRoutes } from './routes/decisions.js';
import { agentRoutes } from './routes/agent.js';
import { type SnapshotUploads, snapshotRoutes } from './routes/snapshot.js';
import { replicationRoutes } from './routes/replication.js';
import { type ClusterHooks, clientOf, forwardToDatacenter, forwardToLeader, forwardWrite, isWrite, mustForward } from './forward.js';
import { tokenRoutes } from './routes/tokens.js';

/** 1 MiB: larger bodies get 413. */
export { BODY_LIMIT };

export interface AppDeps {
  store: Store;
  tokens: TokenService;
  policies: PolicyService;
  roles: RoleService;
  templatedPolicies: TemplatedPolicyService;
  /** Authorization decisions for the request's token (SPEC §17). */
  decisions: DecisionService;
  authMethods: AuthMethodService;
  bindingRules: BindingRuleService;
  login: LoginService;
  bootstrap: BootstrapService;
  snapshots: SnapshotService;
  agent: AgentInfo;
  /** Resolves secrets to identities (permission checks outside the ACL services). */
  resolver: AclResolver;
  reads: ReadGate;
  metrics: Metrics;
  /** GET /v1/acl/replication. */
  replicationStatus: () => ReplicationStatusResponse;
  /** The daemon's place in the cluster: ?dc= forwarding and, on secondaries, write forwarding. */
  cluster?: ClusterHooks;
  /** Connection and request timeouts and caps; absent means Node's and Fastify's defaults. */
  limits?: HttpLimits;
  /**
   * Per-client request limit; absent means none. Requests a peer daemon forwards count
   * against the original client's bucket (X-Service-Forwarded-For) and against the
   * peer's own, larger `peerRate`.
   */
  rateLimit?: { rate: number; burst: number; peerRate: number; peerBurst: number };
  logger?: FastifyBaseLogger;
  /** Logins per second per client, with a burst (SPEC §18: on by default; rate 0 turns it off). */
  loginRate?: { rate: number; burst: number };
  /** Restores: the upload limit and where the file is kept while verified (default 512 MiB, the working directory). */
  snapshotUploads?: SnapshotUploads;
  /** TLS options of the listener (SPEC §16): with them the API speaks HTTPS only. */
  https?: HttpsServerOptions;
}


/** How long clients may take and how many connections they may hold (all ms or counts). */
export interface HttpLimits {
  /** Whole request (headers and body) must arrive within this; waiting for a blocking answer does not count. */
  requestTimeout: number;
  /** Headers must arrive within this. */
  headerTimeout: number;
  keepAliveTimeout: number;
  /** Requests per keep-alive connection (0: no limit). */
  maxRequestsPerConn: number;
  /** Open connections at once. */
  maxConns: number;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** On reads of a table: the X-Service-Index family of headers to send, whatever the answer. */
    readHeaders(request: FastifyRequest): Record<string, string> | undefined;
  }
}

/**
 * The index headers of a read (X-Service-* and their X-Consul-* aliases), built once per
 * distinct value rather than eight header calls per request.
 */
class IndexHeaders {
  private key = '';
  private value: Record<string, string> = {};

  get(index: number, knownLeader: boolean, lastContact: number, consistency: string): Record<string, string> {
    const key = `${index}|${knownLeader}|${lastContact}|${consistency}`;
    if (key !== this.key) {
      this.key = key;
      const v: Record<string, string> = {};
      for (const prefix of ['x-service-', 'x-consul-']) {
        v[`${prefix}index`] = String(index);
        v[`${prefix}knownleader`] = String(knownLeader);
        v[`${prefix}lastcontact`] = String(lastContact);
        v[`${prefix}effective-consistency`] = consistency;
      }
      this.value = v;
    }
    return this.value;
  }
}

/**
 * Builds the HTTP API (never listens: the daemon or a test decides). Every route is
 * registered here, errors leave through one handler, and bodies are read as text so
 * that JSON is accepted whatever the Content-Type.
 */
export function buildApp(deps: AppDeps): { app: FastifyInstance; routes: RouteInfo[] } {
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
  const app = Fastify({
    ...(deps.https ? { https: { ...deps.https, ...serverOptions } } : { http: serverOptions }),
    ...(limits
      ? {
          requestTimeout: limits.requestTimeout,
          keepAliveTimeout: limits.keepAliveTimeout,
          maxRequestsPerSocket: limits.maxRequestsPerConn,
        }
      : {}),
    loggerInstance: deps.logger ?? pino({ level: 'silent' }),
    // One line per request comes from the onResponse hook below, without URLs or headers.
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
  });

  if (limits) app.server.maxConnections = limits.maxConns;

  const rateLimit = deps.rateLimit;
  if (rateLimit && rateLimit.rate > 0) {
    const limiter = new RateLimiter(rateLimit.rate, Math.max(1, rateLimit.burst));
    const peerLimiter = new RateLimiter(rateLimit.peerRate, Math.max(1, rateLimit.peerBurst));
    app.addHook('onRequest', async (request, reply) => {
      const { client, viaPeer } = clientOf(request, deps.cluster ? (ip) => deps.cluster?.isPeer(ip) ?? false : undefined);
      let wait = 0;
      if (viaPeer !== undefined) {
        wait = peerLimiter.take(`peer ${viaPeer}`);
        if (wait > 0) {
          return sendError(request, reply, new WatchwordError('RATE_LIMITED', `Too many requests forwarded by the daemon at ${viaPeer}: the limit is ${rateLimit.peerRate} per second; retry in ${wait} s`, { retryAfter: wait }));
        }
      }
      wait = limiter.take(client);
      if (wait === 0) return undefined;
      return sendError(request, reply, new WatchwordError('RATE_LIMITED', `Too many requests from ${client}: the limit is ${rateLimit.rate} per second; retry in ${wait} s`, { retryAfter: wait }));
    });
  }


  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => done(null, body));

  // The index headers of reads (errors included) are added where replies are sent
  // (sendJSONText, sendError): no hook runs on every response for them.
  const indexHeaders = new IndexHeaders();
  app.decorate('readHeaders', (request: FastifyRequest): Record<string, string> | undefined => {
    const table = request.routeOptions.config?.table;
    if (table === undefined || (request.method !== 'GET' && request.method !== 'HEAD')) return undefined;
    const consistency = request.consistency === 'consistent' ? 'consistent' : request.consistency === 'stale' ? 'stale' : 'leader';
    return indexHeaders.get(Math.max(1, request.watchIndex ?? deps.store.tableIndex(table)), deps.agent.knownLeader(), deps.agent.lastContactMs(), consistency);
  });

  // One metrics sample per request, and a debug log line (as Consul logs requests at
  // debug): the route pattern, never the URL, so no secret from a path or query string
  // can reach the log.
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unknown';
    deps.metrics.observeRequest(request.method, route, reply.statusCode, reply.elapsedTime / 1000);
    if ((request.log as unknown as Logger).isLevelEnabled('debug')) {
      request.log.debug({ reqId: request.id, method: request.method, route, status: reply.statusCode, durationMs: Math.round(reply.elapsedTime * 100) / 100 }, 'request');
    }
    done();
  });

  const cluster = deps.cluster;
  if (cluster) {
    const forward = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> => {
      if ((request.routeOptions.url ?? '').startsWith('/v1/acl/')) {
        const relayed = await forwardToDatacenter(request, reply, cluster);
        if (relayed) return relayed;
      }
      const follower = cluster.follower?.();
      if (follower && isWrite(request.method) && !(request.routeOptions.url ?? '').startsWith('/v1/internal/')) {
        return forwardToLeader(request, reply, follower, cluster.datacenter);
      }
      const rule = request.routeOptions.config?.forward;
      const secondary = cluster.secondary;
      if (rule && secondary && (await mustForward(request, rule, secondary))) return forwardWrite(request, reply, secondary, cluster.datacenter);
      return undefined;
    };
    app.addHook('preHandler', (request, reply, done) => {
      // Most requests stay here: no ?dc= and no write a secondary sends on.
      const dc = (request.query as Record<string, unknown>).dc;
      const here = dc === undefined || dc === '' || dc === cluster.datacenter;
      if (here && !(cluster.secondary && request.routeOptions.config?.forward) && !(cluster.follower && isWrite(request.method) && cluster.follower())) return done();
      forward(request, reply).then(
        (relayed) => {
          if (!relayed) done();
        },
        (err: unknown) => done(err as Error),
      );
    });
  }

  app.setErrorHandler((error, request, reply) => sendError(request, reply, error));
  app.setNotFoundHandler((request, reply) =>
    sendError(request, reply, new WatchwordError('NOT_FOUND', `No such endpoint: ${request.method} ${request.url.split('?')[0]}`)),
  );

  const routes: RouteInfo[] = [];
  bootstrapRoutes(app, deps, routes);
  tokenRoutes(app, deps, routes);
  policyRoutes(app, deps, routes);
  roleRoutes(app, deps, routes);
  templatedPolicyRoutes(app, deps, routes);
  decisionRoutes(app, deps, routes);
  authMethodRoutes(app, deps, routes);
  agentRoutes(app, deps, routes);
  snapshotRoutes(app, deps, routes);
  replicationRoutes(app, deps, routes);

  // Built on first request, when every route (this one included) is registered.
  let document: Record<string, unknown> | undefined;
  resource(app, '/v1/openapi.json', {
    GET: {
      doc: { summary: 'This OpenAPI document', permission: 'none', response: z.record(z.string(), z.unknown()) },
      handler: async (request, reply) => sendJSON(request, reply, (document ??= openAPIDocument(routes, deps.agent.version))),
    },
  }, routes);
  // The web UI: its own plugin context, so its security headers stay on its pages.
  void app.register(registerUI);
  return { app, routes };
}
