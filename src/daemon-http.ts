import type { FastifyInstance } from 'fastify';
import type { RecentChecks } from './service/recent-checks.js';
import { clientReports } from './service/watch-reports.js';
import type { Logger } from 'pino';
import { type Config, parseHostPort } from './config/schema.js';
import { ReadGate, readAuthorizer } from './http/blocking.js';
import { buildApp } from './http/app.js';
import type { IncomingMessage } from 'node:http';
import type { Refusal } from './http/deps.js';
import { plainAddress } from './http/request.js';
import { secretOf } from './transport/credentials.js';
import { whenRefused } from './transport/refuse.js';
import { AuthorizerWatches, DEFAULT_WATCH_LIMITS, type WatchCredential } from './service/authorizer-watch.js';
import { AUTHORIZER_WATCH_PATH, AuthorizerWatchSockets, lookUpForWatch } from './http/authorizer-watch-socket.js';
import { forwardProof, previousReleaseProof } from './transport/forward-proof.js';
import type { AclResolver, Identity } from './service/acl-resolver.js';
import { WatchwordError } from './domain/errors.js';
import type { AgentInfo } from './service/context.js';
import type { LevelStore } from './store/level-store.js';
import type { ClusterHooks } from './http/forward.js';
import { PeerClient } from './transport/peer-client.js';
import type { ClusterRole } from './ha/cluster-role.js';
import type { AppDeps } from './http/deps.js';
import type { Metrics } from './observability/metrics.js';
import type { DatacenterDirectory } from './replication/directory.js';
import { primaryEpochOf } from './replication/apply.js';
import type { Transport } from './transport/transport.js';
import { HostCheck, isLoopbackHost } from './http/host-check.js';
import { ReplicationHistory } from './observability/replication-history.js';
import { type AuditLog, auditPath } from './observability/audit.js';

/**
 * The daemon's HTTP side (daemon.ts builds it): the API app over the services, with forwarding
 * to peers, blocking reads, the limits a reload may change and the lag history; refusals
 * audited; the listener bound.
 */

/** The services the API serves (daemon.ts builds them). */
export type HttpServices = Pick<
  AppDeps,
  | 'tokens'
  | 'policies'
  | 'roles'
  | 'templatedPolicies'
  | 'decisions'
  | 'whoCan'
  | 'dryRun'
  | 'authMethods'
  | 'bindingRules'
  | 'quotas'
  | 'inventory'
  | 'login'
  | 'bootstrap'
  | 'snapshots'
  | 'resolver'
>;

/** The parts of this server's place in the cluster that the daemon's builders share. */
export interface PlaceDeps {
  store: LevelStore;
  metrics: Metrics;
  cluster: ClusterRole;
  transport: Transport;
  audit: AuditLog;
  directory: DatacenterDirectory;
}

export type Http = ReturnType<typeof buildHttp>;

/** The HTTP API (not listening yet): forwarding to peers, blocking reads, limits a reload may change, the lag history. */
export function buildHttp(
  config: Config,
  deps: PlaceDeps & { services: HttpServices & { recentChecks: RecentChecks }; agent: AgentInfo; logger: Logger; dataDir: string },
) {
  const { store, metrics, cluster, transport, audit, directory, services, agent, logger, dataDir } = deps;
  const peers = new Map<string, PeerClient>();
  const hooks: ClusterHooks = {
    datacenter: config.datacenter,
    addressOf: (dc) => directory.addressesOf(dc),
    ...forwarding(config, transport, cluster, store),
    ...(config.servers.kind === 'single' ? {} : { follower: () => cluster.writeTarget() }),
    peer: (dc, url) => {
      let p = peers.get(url);
      if (!p) peers.set(url, (p = new PeerClient(url, dc, transport.fetcher({ datacenter: dc }))));
      return p;
    },
    // At a secondary: its way to the primary (asked per request: a promotion or a newer primary changes it).
    get secondary() {
      return cluster.secondary;
    },
  };
  const reads = new ReadGate(store, {
    gauge: metrics,
    authorize: readAuthorizer(services.resolver),
    maxBlocking: config.max_blocking_queries,
    maxBlockingPerClient: config.max_blocking_queries_per_client,
    ...(cluster.beforeConsistentRead ? { beforeConsistentRead: cluster.beforeConsistentRead } : {}),
  });
  const rateLimit =
    config.rate_limit > 0
      ? (() => {
          const burst = config.rate_limit_burst ?? Math.ceil(config.rate_limit);
          const peerRate = config.rate_limit_peer ?? config.rate_limit * 10;
          return { rate: config.rate_limit, burst, peerRate, peerBurst: Math.max(burst * 10, Math.ceil(peerRate)) };
        })()
      : undefined;
  // Limits a reload (SIGHUP) changes in place.
  const limits = {
    requestTimeout: config.http_request_timeout,
    headerTimeout: config.http_header_timeout,
    keepAliveTimeout: config.http_keepalive_timeout,
    maxRequestsPerConn: config.http_max_requests_per_conn,
    maxConns: config.http_max_conns,
    maxConnsPerClient: config.http_max_conns_per_client,
  };
  const loginRate = { rate: config.login_rate, burst: config.login_burst };
  // Replication lag over the last hour, in memory, for the web UI's chart.
  const history = new ReplicationHistory(() => cluster.replicationStatus(), {
    intervalMs: config.replication_history_interval,
    keepMs: 3_600_000,
    datacenter: config.datacenter,
  });
  const { app } = buildApp({
    store,
    tokens: services.tokens,
    policies: services.policies,
    roles: services.roles,
    templatedPolicies: services.templatedPolicies,
    decisions: services.decisions,
    whoCan: services.whoCan,
    dryRun: services.dryRun,
    authMethods: services.authMethods,
    bindingRules: services.bindingRules,
    quotas: services.quotas,
    inventory: services.inventory,
    login: services.login,
    bootstrap: services.bootstrap,
    snapshots: services.snapshots,
    resolver: services.resolver,
    agent,
    reads,
    metrics,
    replicationStatus: () => cluster.replicationStatus(),
    // At the primary: its epoch, which a write forwarded by a secondary that has seen a higher one is refused against.
    primaryEpoch: () => (cluster.kind === 'primary' ? primaryEpochOf(store) : undefined),
    staleSeen: () => cluster.staleSeen(),
    replicationHistory: () => history.read(),
    audit,
    auditRefusal: refusalAuditor(store, audit),
    cluster: hooks,
    logger,
    limits,
    ...(rateLimit ? { rateLimit } : {}),
    ...(transport.secure ? { https: transport.listenerOptions() } : {}),
    snapshotUploads: { maxBytes: config.snapshot_max_bytes, dir: dataDir },
    loginRate,
  });
  // Enforcing clients' watches of their sets of tokens, one connection each.
  const { watches, watchSockets } = buildWatches(config, { store, audit, metrics, services });
  return { app, reads, history, limits, loginRate, watches, watchSockets };
}

/** Enforcing clients' watches (service/authorizer-watch.ts) and the WebSocket door they come by, admitted by their own token. */
function buildWatches(
  config: Config,
  deps: Pick<PlaceDeps, 'store' | 'audit' | 'metrics'> & { services: HttpServices & { recentChecks: RecentChecks } },
) {
  const { store, audit, metrics, services } = deps;
  const auditRefusal = refusalAuditor(store, audit);
  // A secret no token holds, presented on a watch: audited as a request's would be (by its HMAC).
  const auditUnknown = (secret: string, client: string, message: string): void =>
    auditRefusal({
      id: '',
      method: 'WS',
      url: AUTHORIZER_WATCH_PATH,
      remote: client,
      secret,
      status: 403,
      code: 'ACL_NOT_FOUND',
      message,
      route: AUTHORIZER_WATCH_PATH,
    });
  const watches = new AuthorizerWatches(
    {
      onCommit: (listener) => store.onCommit(listener),
      view: (secret) => services.decisions.watchedView(secret),
      known: (secret) => services.resolver.knows(secret),
      unknownSecret: (secret, client) => {
        auditUnknown(secret, client, 'ACL not found (a secret a watch presented)');
        return services.resolver.guessed(client);
      },
      lookUp: (secret, client) =>
        lookUpForWatch(services.resolver, secret, client, (unknown) =>
          auditUnknown(unknown, client, 'ACL not found (a secret a watch looked up)'),
        ),
      credentialHolds: (c) => holdsWatchRight(services.resolver, c),
      recordUse: (accessor, ms) => store.lastUse.touch(accessor, ms),
      stale: () => services.resolver.stale(),
      now: () => Date.now(),
      report: clientReports(services.recentChecks, audit),
    },
    {
      ...DEFAULT_WATCH_LIMITS,
      connectionBytes: config.watch_max_queued_bytes,
      totalBytes: config.watch_max_total_bytes,
      totalTokens: config.watch_max_tokens,
    },
  );
  metrics.watchAuthorizerWatches(() => watches.size);
  const watchSockets = new AuthorizerWatchSockets(watches, (secret, client) => admitWatch(services.resolver, secret, client));
  return { watches, watchSockets };
}

/** The right a watch's own token must hold: reading ACLs where it lives (what a watch tells is what token reads tell). */
const WATCH_RIGHT = 'acl:read';

/** Admits a watch by the token its upgrade carries (never the anonymous one), which must hold acl:read. */
function admitWatch(resolver: AclResolver, secret: string | undefined, client: string): WatchCredential | Promise<WatchCredential> {
  if (secret === undefined || secret === '')
    throw new WatchwordError(
      'PERMISSION_DENIED',
      `Permission denied: a watch is opened with a token of the client's own that has ${WATCH_RIGHT} (X-Service-Token); none was sent ` +
        '(anonymous decisions are asked for over HTTP)',
    );
  const credential = (identity: Identity): WatchCredential => {
    if (identity.anonymous || !identity.authorizer.canRead(identity.token.Partition, identity.token.Namespace))
      throw new WatchwordError(
        'PERMISSION_DENIED',
        `Permission denied: token with AccessorID '${identity.token.AccessorID}' lacks permission '${WATCH_RIGHT}', which a watch needs`,
      );
    return { accessor: identity.token.AccessorID, secret };
  };
  const identity = resolver.resolve(secret, client);
  return identity instanceof Promise ? identity.then(credential) : credential(identity);
}

/** Whether a watch's own token still authenticates as the same token with the right a watch needs. */
function holdsWatchRight(resolver: AclResolver, c: WatchCredential): boolean {
  try {
    const identity = resolver.resolveLocal(c.secret);
    return (
      !identity.anonymous &&
      identity.token.AccessorID === c.accessor &&
      identity.authorizer.canRead(identity.token.Partition, identity.token.Namespace)
    );
  } catch {
    return false;
  }
}

/**
 * Who may name the original client of a request it forwards, and how this server proves it does
 * (transport/forward-proof.ts): a server of this datacenter by the server key (or its
 * certificate); another datacenter's by its certificate, or by the forwarding key the primary
 * datacenter hands each secondary over its replication stream (transport/forward-keys.ts). No
 * API token is a key.
 */
function forwarding(
  config: Config,
  transport: Transport,
  cluster: ClusterRole,
  store: LevelStore,
): Pick<ClusterHooks, 'forwarderCheck' | 'forwardProof'> {
  const keys = transport.forwardKeys;
  return {
    forwarderCheck: (req, claim, fields) =>
      transport.vouches(req, claim, fields, (id) =>
        claim.byServer ? undefined : keys.checking(id, claim.from, cluster.kind === 'primary'),
      ),
    forwardProof: (fields, to) => {
      if (to.byServer) return transport.serverForwardProof(fields);
      if (to.datacenter === config.datacenter) return undefined;
      const signing = keys.signing(to.datacenter, cluster.kind === 'primary');
      if (signing !== undefined) return forwardProof(signing.id, signing.key, fields);
      // A primary of the previous release hands no key and believes only its own form of proof.
      const secret = cluster.kind === 'secondary' ? config.replication_token : undefined;
      const token = secret ? store.reader.getTokenBySecret(secret) : undefined;
      return token && secret ? previousReleaseProof(token.AccessorID, secret, fields) : undefined;
    },
  };
}

/** Records a refused request: the caller's token by its accessor, or an unknown secret by its HMAC; never the secret. */
export function refusalAuditor(store: LevelStore, audit: AuditLog): (r: Refusal) => void {
  return (r) => {
    const token = r.secret ? store.reader.getTokenBySecret(r.secret) : undefined;
    const accessor = !r.secret ? 'anonymous' : token ? token.AccessorID : audit.nameSecret(r.secret);
    audit.record(
      'refused',
      {
        RequestID: r.id,
        AccessorID: accessor,
        RemoteAddr: r.remote,
        ...(r.via !== undefined ? { ViaAddr: r.via } : {}),
        Method: r.method,
        Path: auditPath(r.url),
      },
      r.status,
      { Code: r.code, Reason: r.message, ...(r.decision ? { Decision: r.decision } : {}) },
    );
  };
}

/**
 * Every refused WebSocket upgrade (a replication or servers' stream, whichever handler refuses
 * it): logged, and audited as `refused` when it is a 403, as a refused route is.
 */
function upgradeRefusals(logger: Logger, auditRefusal: (r: Refusal) => void) {
  return (req: IncomingMessage, status: number, code: string, reason: string): void => {
    const remote = plainAddress(req.socket.remoteAddress ?? '');
    const path = auditPath(req.url ?? '/');
    logger.warn({ remote, path, status }, `refused a WebSocket upgrade: ${reason}`);
    if (status !== 401 && status !== 403) return;
    let secret: string | undefined;
    try {
      secret = secretOf(undefined, req.headers);
    } catch {
      secret = undefined;
    }
    auditRefusal({ id: '', method: req.method ?? 'GET', url: req.url ?? '/', remote, secret, status, code, message: reason, route: path });
  };
}

/** A host that means every address of the machine. */
const isWildcardHost = (host: string): boolean => host === '' || host === '0.0.0.0' || host === '::' || host === '[::]';

/** The accept queue asked of the kernel: enough for a burst of clients connecting at once. */
const LISTEN_BACKLOG = 4096;

/** Binds the API (Host checks against DNS rebinding, the servers' upgrades handed to the cluster role); returns host:port. */
export async function listen(
  config: Config,
  app: FastifyInstance,
  deps: {
    transport: Transport;
    cluster: ClusterRole;
    logger: Logger;
    auditRefusal: (r: Refusal) => void;
    watchSockets: AuthorizerWatchSockets;
    /** The upgraded connections (streams, watches) open now: a stop destroys those left after its grace. */
    upgraded?: Set<import('node:stream').Duplex>;
    /** Set while the daemon stops: every answer then closes its connection (clients open the next one elsewhere). */
    draining?: { now: boolean };
  },
): Promise<string> {
  const { transport, cluster, logger } = deps;
  const refused = upgradeRefusals(logger, deps.auditRefusal);
  if (transport.secure) transport.attachListener(app.server as unknown as import('node:tls').Server);
  const { host, port } = parseHostPort(config.http_addr) as { host: string; port: number };
  // DNS rebinding: a loopback daemon answers only requests addressed to loopback (or http_allowed_hosts).
  const hosts = new HostCheck({
    loopbackOnly: isLoopbackHost(host),
    allowed: config.http_allowed_hosts,
    defaultPort: transport.secure ? 443 : 80,
  });
  hosts.install(app.server as unknown as import('node:http').Server);
  // First of the request listeners, so that even an answer written at once closes its connection while the daemon stops.
  app.server.prependListener('request', (_req, res) => {
    if (deps.draining?.now) res.shouldKeepAlive = false;
  });
  app.server.on('upgrade', (req, socket, head) => {
    // Held until it closes: a stop ends what is still open after its grace (a WebSocket's close handshake may never finish).
    deps.upgraded?.add(socket);
    socket.once('close', () => deps.upgraded?.delete(socket));
    // Node takes its own error listener off a socket it hands to an upgrade: a client that resets
    // the connection (after a refusal, or mid-handshake) would otherwise end the process.
    socket.on('error', () => socket.destroy());
    whenRefused(socket, (status, reason) => refused(req, status, status === 403 ? 'PERMISSION_DENIED' : 'UPGRADE_REFUSED', reason));
    if (hosts.refuseUpgrade(req, socket))
      return refused(req, 403, 'HOST_NOT_ALLOWED', `Host ${JSON.stringify(req.headers.host ?? '')} is not allowed`);
    // Enforcing clients' watches are the API's; every other upgrade is a server's stream.
    if ((req.url ?? '').split('?')[0] === AUTHORIZER_WATCH_PATH) return deps.watchSockets.upgrade(req, socket, head);
    cluster.handleUpgrade(req, socket, head);
  });
  // Node's default backlog (511) overflows when a burst of clients connects at once (each
  // dropped handshake costs its client a 1 s retransmit, or a reset); the kernel caps this at
  // net.core.somaxconn.
  await app.listen({ host, port, backlog: Math.min(config.http_max_conns, LISTEN_BACKLOG) });
  const bound = app.server.address();
  const boundPort = typeof bound === 'object' && bound ? bound.port : port;
  const address = `${host.includes(':') ? `[${host}]` : host}:${boundPort}`;
  if (isWildcardHost(host) && config.http_allowed_hosts.length === 0) {
    logger.warn(
      `listening on ${address}, every address of this machine, without http_allowed_hosts: requests are answered whatever ` +
        `Host they name, so a browser page elsewhere can reach this daemon through DNS rebinding (set http_allowed_hosts to the ` +
        `names clients use)`,
    );
  }
  if (!transport.secure && !isLoopbackHost(host)) {
    logger.warn(
      `listening on ${address} without TLS: tokens and replicated secrets cross the network in plaintext (set tls_cert_file and ` +
        `tls_key_file)`,
    );
  }
  return address;
}
