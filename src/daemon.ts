import { chmod, mkdir, readdir, rename, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { type Config, isPrimary, parseHostPort } from './config/schema.js';
import { type Clock, systemClock } from './domain/clock.js';
import { ReadGate, readAuthorizer } from './http/blocking.js';
import { buildApp } from './http/app.js';
import { formatDuration } from './domain/duration.js';
import { createAgentLogger } from './observability/logger.js';
import { Metrics } from './observability/metrics.js';
import { Reaper } from './reaper/reaper.js';
import { AclResolver } from './service/acl-resolver.js';
import { BootstrapService } from './service/bootstrap.js';
import type { AgentInfo } from './service/context.js';
import { PolicyService } from './service/policies.js';
import { RoleService } from './service/roles.js';
import { TemplatedPolicyService } from './service/templated-policies.js';
import { DecisionService } from './service/decisions.js';
import { TokenService } from './service/tokens.js';
import { AuthMethodService } from './service/auth-methods.js';
import { BindingRuleService } from './service/binding-rules.js';
import { LoginService } from './service/login.js';
import { SnapshotService } from './service/snapshots.js';
import { LevelStore, type LevelStoreOptions } from './store/level-store.js';
import type { ClusterHooks } from './http/forward.js';
import { PeerClient } from './replication/primary-client.js';
import { DatacenterDirectory } from './replication/directory.js';
import { policyView } from './service/views.js';
import type { ServerGroup } from './ha/servers.js';
import { type ClusterRole, DEFAULT_REPLICATION_OPTIONS, type RoleParts, hostOf } from './ha/role.js';
import { createClusterRole } from './ha/roles.js';
import type { ReplicationStatusResponse } from './api/schemas.js';
import { Transport } from './transport/transport.js';
import { VERSION } from './version.js';

export interface Daemon {
  readonly config: Config;
  readonly metrics: Metrics;
  readonly app: FastifyInstance;
  readonly store: LevelStore;
  /** host:port the HTTP API is bound to. */
  readonly address: string;
  readonly url: string;
  readonly reaper: Reaper;
  /** GET /v1/acl/replication, in process. */
  replication(): ReplicationStatusResponse;
  /** HA: this server's part in its datacenter (undefined: a single server). */
  readonly servers: ServerGroup | undefined;
  /** Re-reads the TLS certificate, key and CA (SIGHUP); false when they could not be used (the old ones stay). */
  reload(): boolean;
  close(): Promise<void>;
}

export { DEFAULT_REPLICATION_OPTIONS };

export interface DaemonOptions {
  clock?: Clock;
  /** HA timings; tests shorten them. */
  servers?: { pollMs?: number; syncTimeoutMs?: number };
  /** Tests only: disk writes that fail on demand. */
  storeFaults?: LevelStoreOptions['faults'];
  logger?: Logger;
  replication?: Partial<typeof DEFAULT_REPLICATION_OPTIONS>;
}

/** Longest wait for in-flight requests on shutdown, ms. */
const SHUTDOWN_GRACE_MS = 10_000;

export { VERSION } from './version.js';

/** /v1/agent/self: the configuration without secrets (only whether they are set), version and role. */
function agentSelf(config: Config, address: string, store: LevelStore, metrics: Metrics, cluster: ClusterRole, transport: Transport, operatorRead: boolean) {
  const tls = config.tls;
  return {
    Config: {
      Datacenter: config.datacenter,
      PrimaryDatacenter: config.primary_datacenter,
      Role: cluster.kind,
      ServerRole: cluster.isLeader() ? 'leader' : 'follower',
      ServerPeers: config.server_peers,
      Coordinator: config.coordinator === undefined ? null : operatorRead ? config.coordinator : '<hidden>',
      TLS: {
        Enabled: tls !== undefined,
        VerifyIncoming: tls?.verifyIncoming ?? false,
        VerifyOutgoing: tls?.verifyOutgoing ?? false,
        VerifyServerHostname: tls?.verifyServerHostname ?? false,
        Domain: transport.domain,
        MinVersion: tls?.minVersion ?? null,
        ServerName: transport.serverName(config.datacenter),
      },
      ServerKeySet: config.server_key !== undefined,
      NodeName: config.node_name,
      Version: VERSION,
      HTTPAddr: address,
      AdvertiseAddr: config.advertise_addr ?? null,
      DatacenterAddresses: config.datacenter_addresses,
      PrimaryAddress: config.primary_address ?? null,
      DataDir: resolve(config.data_dir),
      DefaultPolicy: config.default_policy,
      TokenMinTTL: formatDuration(config.token_min_ttl),
      TokenMaxTTL: formatDuration(config.token_max_ttl),
      ReapInterval: formatDuration(config.reap_interval),
      Durability: config.durability,
      LogRetention: config.log_retention,
      RateLimit: config.rate_limit,
      RateLimitPeer: config.rate_limit_peer ?? config.rate_limit * 10,
      SecretLookupRate: config.secret_lookup_rate,
      MaxBlockingQueries: config.max_blocking_queries,
      MaxBlockingQueriesPerClient: config.max_blocking_queries_per_client,
      HTTPRequestTimeout: formatDuration(config.http_request_timeout),
      HTTPHeaderTimeout: formatDuration(config.http_header_timeout),
      HTTPKeepAliveTimeout: formatDuration(config.http_keepalive_timeout),
      HTTPMaxRequestsPerConn: config.http_max_requests_per_conn,
      HTTPMaxConns: config.http_max_conns,
      LogLevel: config.log_level,
      ReplicationTokenSet: config.replication_token !== undefined,
      InitialManagementTokenSet: config.initial_management_token !== undefined,
    },
    Store: (() => {
      const h = store.health();
      return { Available: h.available, LastError: h.lastError ?? '', UnavailableSince: h.since === undefined ? null : new Date(h.since).toISOString() };
    })(),
    Stats: {
      Index: store.currentIndex(),
      Tokens: store.count('tokens'),
      Roles: store.count('roles'),
      Policies: store.count('policies'),
      BlockingQueries: metrics.blockingInFlight(),
    },
  };
}

/**
 * The composition root: opens the store, builds services, HTTP and the reaper, and
 * starts them in order. Nothing serves before the store is open; close() stops in the
 * reverse order and leaves the store flushed.
 */
export async function startDaemon(config: Config, options: DaemonOptions = {}): Promise<Daemon> {
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? createAgentLogger(config.log_level);
  const primary = isPrimary(config);
  const dataDir = resolve(config.data_dir);
  // Certificates are checked before anything else: a bad file is one line and exit 1, with nothing opened.
  const transport = new Transport({ datacenter: config.datacenter, tls: config.tls, etcd: config.etcd, serverKey: config.server_key, logger });
  // Secrets live in the store: nothing the daemon creates is readable by other users.
  process.umask(0o077);
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  await restrictModes(dataDir);

  let metricsRef: Metrics | undefined;
  const store = await LevelStore.open(join(dataDir, 'store'), {
    durability: config.durability,
    changeLog: primary,
    datacenter: config.datacenter,
    ...(options.storeFaults ? { faults: options.storeFaults } : {}),
    onAvailability: (available, cause) => {
      metricsRef?.storeAvailable.set(available ? 1 : 0);
      if (available) logger.info('store: writes succeed again; accepting writes');
      else logger.error({ err: cause }, 'store: a write failed; refusing writes (503) and retrying until the disk accepts them');
    },
  });
  let address = '';
  /** Where other datacenters reach this daemon: advertise_addr, else the bound address. */
  const advertised = (): string => config.advertise_addr ?? address;
  const metrics = new Metrics(store);
  metricsRef = metrics;
  // The server's place first: the services below are built from what it offers (look-ups of
  // secrets held elsewhere, checks of chosen IDs), and it gets theirs when it starts.
  const cluster: ClusterRole = createClusterRole({
    config,
    store,
    metrics,
    logger,
    replication: { ...DEFAULT_REPLICATION_OPTIONS, backoffMinMs: config.replication_backoff_min, backoffMaxMs: config.replication_backoff_max, ...options.replication },
    transport,
    ...(options.servers ? { serverTimings: options.servers } : {}),
    advertised,
  });
  try {
    const resolver = new AclResolver(store, clock, {
      datacenter: config.datacenter,
      defaultPolicy: config.default_policy,
      // Secondaries and followers: a secret this server does not hold is asked for where it may have been made.
      ...(cluster.lookupUnknownSecret ? { lookupUnknownSecret: cluster.lookupUnknownSecret } : {}),
      ...(!primary && config.replication_max_stale > 0 ? { staleness: { maxMs: config.replication_max_stale, silentForMs: () => cluster.primarySilentForMs() } } : {}),
    });
    const tokens = new TokenService(store, resolver, clock, {
      limits: { minTTL: config.token_min_ttl, maxTTL: config.token_max_ttl },
      checkChosenIDs: (ids, local) => cluster.checkChosenIDs(ids, local),
    });
    const policies = new PolicyService(store, resolver);
    const roles = new RoleService(store, resolver);
    const templatedPolicies = new TemplatedPolicyService(resolver);
    const decisions = new DecisionService(resolver, store);
    const urls = { allowedHosts: config.auth_method_allowed_hosts };
    const authMethods = new AuthMethodService(store, resolver, { minTTL: config.token_min_ttl, maxTTL: config.token_max_ttl, urls });
    const bindingRules = new BindingRuleService(store, resolver);
    const login = new LoginService(store, clock, { datacenter: config.datacenter, urls });
    const snapshots = new SnapshotService(store, resolver, clock, { datacenter: config.datacenter, primaryDatacenter: config.primary_datacenter, isPrimary: primary });
    const bootstrap = new BootstrapService(store, tokens, clock, {
      dataDir,
      isPrimary: primary,
      primaryDatacenter: config.primary_datacenter,
      ...(config.primary_address ? { primaryAddress: config.primary_address } : {}),
    });
    const single = config.servers.kind === 'single';
    if (!primary && config.initial_management_token) {
      logger.warn('initial_management_token is only used by the primary; ignored on this secondary');
    }

    const reaper = new Reaper(store, clock, {
      interval: config.reap_interval,
      isPrimary: primary,
      onReaped: (count) => {
        metrics.reaped.inc(count);
        logger.info({ count }, 'reaped expired tokens');
      },
      onError: (err) => logger.error({ err }, 'reaper pass failed'),
    });

    const roleParts: RoleParts = {
      resolver,
      localView: (kind, id) => {
        if (kind === 'token') {
          const t = store.reader.getToken(id);
          return t && tokens.view(t, true);
        }
        if (kind === 'policy') {
          const p = store.reader.getPolicy(id);
          return p && policyView(p);
        }
        const r = store.reader.getRole(id);
        return r && roles.view(r);
      },
      // What only the leader of a datacenter runs besides replication: the built-ins (made by
      // whichever server leads first; a single server leads from the start) and the reaper.
      leaderParts: {
        start: async () => {
          if (primary) {
            await bootstrap.ensureBuiltins();
            if (config.initial_management_token) await bootstrap.ensureInitialManagementToken(config.initial_management_token);
          }
          reaper.start();
        },
        stop: () => reaper.stop(),
      },
    };

    const directory = new DatacenterDirectory({
      datacenter: config.datacenter,
      primaryDatacenter: config.primary_datacenter,
      ...(config.placement.role === 'secondary' ? { primaryURLs: config.placement.primaryAddresses } : {}),
      configured: Object.fromEntries(Object.entries(config.datacenter_addresses).map(([dc, url]) => [dc, transport.peerURL(url)])),
      ownURL: () => transport.peerURL(advertised()),
      peerURL: (address) => transport.peerURL(address),
      reported: () => cluster.reportedDatacenters(),
    });

    const agent: AgentInfo = {
      datacenter: config.datacenter,
      primaryDatacenter: config.primary_datacenter,
      nodeName: config.node_name,
      version: VERSION,
      defaultPolicy: config.default_policy,
      downPolicy: 'extend-cache',
      address: () => address,
      knownLeader: () => cluster.knownLeader(),
      lastContactMs: () => cluster.lastContactMs(),
      datacenters: () => directory.list().map((d) => d.name),
      self: (operatorRead) => agentSelf(config, address, store, metrics, cluster, transport, operatorRead),
      leaderAddress: () => cluster.leaderAddress(),
      peers: () => cluster.peers(),
      servers: () => cluster.servers(),
    };
    metrics.watchServers(() => agent.servers(), config.node_name);
    if (!primary && config.replication_max_stale > 0) {
      metrics.watchStaleness(() => (cluster.primarySilentForMs() ?? 0) > config.replication_max_stale);
    }

    const peers = new Map<string, PeerClient>();
    const hooks: ClusterHooks = {
      datacenter: config.datacenter,
      addressOf: (dc) => directory.addressesOf(dc),
      isPeer: (ip) => cluster.isPeerAddress(ip) || (!primary && directory.isKnownHost(ip, hostOf)),
      ...(single ? {} : { follower: () => cluster.writeTarget() }),
      peer: (dc, url) => {
        let p = peers.get(url);
        if (!p) peers.set(url, (p = new PeerClient(url, dc, transport.fetcher({ datacenter: dc }))));
        return p;
      },
      ...(cluster.secondary ? { secondary: cluster.secondary } : {}),
    };

    const reads = new ReadGate(store, {
      gauge: metrics,
      authorize: readAuthorizer(resolver),
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
    const { app } = buildApp({
      store,
      tokens,
      policies,
      roles,
      templatedPolicies,
      decisions,
      authMethods,
      bindingRules,
      login,
      bootstrap,
      snapshots,
      agent,
      resolver,
      reads,
      metrics,
      replicationStatus: () => cluster.replicationStatus(),
      cluster: hooks,
      logger,
      limits: {
        requestTimeout: config.http_request_timeout,
        headerTimeout: config.http_header_timeout,
        keepAliveTimeout: config.http_keepalive_timeout,
        maxRequestsPerConn: config.http_max_requests_per_conn,
        maxConns: config.http_max_conns,
      },
      ...(rateLimit ? { rateLimit } : {}),
      ...(transport.secure ? { https: transport.listenerOptions() } : {}),
      snapshotUploads: { maxBytes: config.snapshot_max_bytes, dir: dataDir },
      loginRate: { rate: config.login_rate, burst: config.login_burst },
    });
    if (transport.secure) transport.attachListener(app.server as unknown as import('node:tls').Server);
    app.server.on('upgrade', (req, socket, head) => cluster.handleUpgrade(req, socket, head));

    const { host, port } = parseHostPort(config.http_addr) as { host: string; port: number };
    await app.listen({ host, port });
    const bound = app.server.address();
    const boundPort = typeof bound === 'object' && bound ? bound.port : port;
    address = `${host.includes(':') ? `[${host}]` : host}:${boundPort}`;
    if (!transport.secure && !isLoopback(host)) {
      logger.warn(`listening on ${address} without TLS: tokens and replicated secrets cross the network in plaintext (set tls_cert_file and tls_key_file)`);
    }
    await cluster.start(roleParts);
    // Announced once this server has taken its place (a single primary has its built-ins by now).
    // Written whole then renamed: whoever polls for the file never reads it half written.
    const addrFile = join(dataDir, 'http-addr');
    await writeFile(`${addrFile}.tmp`, `${address}\n`, { mode: 0o600 });
    await rename(`${addrFile}.tmp`, addrFile);
    logger.info({ address, datacenter: config.datacenter, primary: config.primary_datacenter, role: cluster.kind, dataDir }, 'watchword agent started');

    let closing: Promise<void> | undefined;
    return {
      config,
      metrics,
      app,
      store,
      address,
      url: transport.peerURL(address),
      reaper,
      replication: () => cluster.replicationStatus(),
      get servers() {
        return cluster.group;
      },
      reload: () => transport.reload(),
      close() {
        closing ??= (async () => {
          reads.shutdown();
          // Leadership is given up first (the lease revoked), so a successor need not wait for it to lapse.
          await cluster.stop();
          // Stop accepting and drop idle keep-alive sockets; requests in flight finish
          // (blocked reads were just released) within the grace time, then whatever
          // is left is cut: shutdown never waits on clients.
          const closed = app.close();
          await Promise.race([closed, new Promise((r) => setTimeout(r, SHUTDOWN_GRACE_MS).unref())]);
          app.server.closeAllConnections();
          await closed;
          await reaper.stop();
          await transport.close();
          await store.close();
          logger.info('watchword agent stopped');
        })();
        return closing;
      },
    };
  } catch (err) {
    await cluster.stop().catch(() => undefined);
    await store.close().catch(() => undefined);
    throw err;
  }
}

/** Whether a listen host is reachable only from this machine. */
function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127\./.test(host);
}

/** Data dir and everything in it: directories 0700, files 0600 (data dirs made by older versions too). */
async function restrictModes(dir: string): Promise<void> {
  await chmod(dir, 0o700);
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) await restrictModes(path);
    else if (entry.isFile()) await chmod(path, 0o600);
  }
}
