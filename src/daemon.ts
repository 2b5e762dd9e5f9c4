import { chmod, mkdir, readdir, writeFile } from 'node:fs/promises';
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
import { TokenService } from './service/tokens.js';
import { SnapshotService } from './service/snapshots.js';
import { LevelStore, type LevelStoreOptions } from './store/level-store.js';
import { WatchwordError, conflict, isWatchwordError } from './domain/errors.js';
import { RateLimiter } from './http/rate-limit.js';
import { isUUID } from './domain/ids.js';
import type { ClusterHooks } from './http/forward.js';
import { PeerClient } from './replication/primary-client.js';
import { DEFAULT_PRIMARY_OPTIONS, ReplicationPrimary, refuse } from './replication/primary.js';
import { ReplicationSecondary } from './replication/secondary.js';
import { DatacenterDirectory } from './replication/directory.js';
import { policyView } from './service/views.js';
import { type Coordinator, EtcdCoordinator, StaticCoordinator } from './cluster/coordinator.js';
import { ServerGroup } from './cluster/servers.js';
import { SERVERS_PATH } from './cluster/server-protocol.js';
import { REPLICATION_PATH } from './replication/protocol.js';

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
  replication(): unknown;
  /** HA: this server's part in its datacenter (undefined: a single server). */
  readonly servers: ServerGroup | undefined;
  close(): Promise<void>;
}

/** Replication timings and sizes; tests shorten them. */
export const DEFAULT_REPLICATION_OPTIONS = {
  ...DEFAULT_PRIMARY_OPTIONS,
  backoffMinMs: 1000,
  backoffMaxMs: 30_000,
};

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

/** Version of this build, reported by /v1/agent/self. */
export const VERSION = '0.1.0';

/** /v1/agent/self: the configuration without secrets (only whether they are set), version and role. */
function agentSelf(config: Config, address: string, store: LevelStore, metrics: Metrics, servers: ServerGroup | undefined) {
  return {
    Config: {
      Datacenter: config.datacenter,
      PrimaryDatacenter: config.primary_datacenter,
      Role: isPrimary(config) ? 'primary' : 'secondary',
      ServerRole: servers ? (servers.isLeader() ? 'leader' : 'follower') : 'leader',
      ServerPeers: config.server_peers,
      Coordinator: config.coordinator ?? null,
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
  // Several servers: nothing is written here until the coordinator says this server leads.
  if (config.coordinator !== undefined || config.server_peers.length > 1) store.setFollower(true);
  let address = '';
  /** Where other datacenters reach this daemon: advertise_addr, else the bound address. */
  const advertised = (): string => config.advertise_addr ?? address;
  let primaryRepl: ReplicationPrimary | undefined;
  let secondaryRepl: ReplicationSecondary | undefined;
  /** HA (§13): several servers in this datacenter, one leading. */
  let servers: ServerGroup | undefined;
  const ha = config.coordinator !== undefined || config.server_peers.length > 1;
  /** Set while another server of this datacenter leads. */
  const leaderClient = (): PeerClient | undefined => {
    const url = servers?.isLeader() === false ? servers.leaderURL() : undefined;
    if (!url) return undefined;
    let c = leaderClients.get(url);
    if (!c) leaderClients.set(url, (c = new PeerClient(url, `${config.datacenter} (leader)`)));
    return c;
  };
  const leaderClients = new Map<string, PeerClient>();
  const primaryClient = primary ? undefined : new PeerClient(config.primary_address as string, config.primary_datacenter);
  try {
    const metrics = new Metrics(store);
    metricsRef = metrics;
    const unknownSecrets = new Map<string, number>();
    // A client sending made-up secrets at a secondary must not turn each into a trip to the primary.
    const lookupLimiter = new RateLimiter(config.secret_lookup_rate, Math.max(1, Math.ceil(config.secret_lookup_rate * 2)));
    const resolver = new AclResolver(store, clock, {
      datacenter: config.datacenter,
      defaultPolicy: config.default_policy,
      ...(primaryClient || ha
        ? {
            lookupUnknownSecret: (secret: string, client: string | undefined) => {
              // A follower asks its leader first: the token may have been created there a moment ago.
              const leader = leaderClient();
              if (leader) return lookUpOnPrimary(secret, client, leader, (index, ms) => waitForIndex(store, index, ms), unknownSecrets, lookupLimiter);
              if (primaryClient) return lookUpOnPrimary(secret, client, primaryClient, (index, ms) => secondaryRepl?.waitForApplied(index, ms) ?? Promise.resolve(false), unknownSecrets, lookupLimiter);
              return Promise.resolve(false);
            },
          }
        : {}),
    });
    const replicationToken = config.replication_token;
    const tokens = new TokenService(store, resolver, clock, {
      limits: { minTTL: config.token_min_ttl, maxTTL: config.token_max_ttl },
      checkChosenIDs: async (ids: { accessor?: string; secret?: string }, local: boolean) => {
        if (primaryClient && replicationToken && local) return checkIDsOnPrimary(ids, primaryClient, replicationToken);
        if (primaryRepl && !local) return checkIDsOnSecondaries(ids, primaryRepl);
      },
    });
    const policies = new PolicyService(store, resolver);
    const roles = new RoleService(store, resolver);
    const templatedPolicies = new TemplatedPolicyService(resolver);
    const snapshots = new SnapshotService(store, resolver, clock, { datacenter: config.datacenter, primaryDatacenter: config.primary_datacenter, isPrimary: primary });
    const bootstrap = new BootstrapService(store, tokens, clock, {
      dataDir,
      isPrimary: primary,
      primaryDatacenter: config.primary_datacenter,
      ...(config.primary_address ? { primaryAddress: config.primary_address } : {}),
    });
    if (primary && !ha) {
      await bootstrap.ensureBuiltins();
      if (config.initial_management_token) await bootstrap.ensureInitialManagementToken(config.initial_management_token);
    } else if (!primary && config.initial_management_token) {
      logger.warn('initial_management_token is only used by the primary; ignored on this secondary');
    }

    const directory = new DatacenterDirectory({
      datacenter: config.datacenter,
      primaryDatacenter: config.primary_datacenter,
      ...(config.primary_address ? { primaryURL: (config.primary_address.split(',')[0] as string).trim() } : {}),
      configured: config.datacenter_addresses,
      ownURL: () => `http://${advertised()}`,
      reported: () => primaryRepl?.datacenters() ?? secondaryRepl?.datacenters() ?? [],
    });

    const agent: AgentInfo = {
      datacenter: config.datacenter,
      primaryDatacenter: config.primary_datacenter,
      nodeName: config.node_name,
      version: VERSION,
      defaultPolicy: config.default_policy,
      downPolicy: 'extend-cache',
      address: () => address,
      knownLeader: () => primary || (secondaryRepl?.isConnected() ?? false),
      lastContactMs: () => (primary ? 0 : (secondaryRepl?.lastContactMs() ?? 0)),
      datacenters: () => directory.list().map((d) => d.name),
      self: () => agentSelf(config, address, store, metrics, servers),
      // A server that cannot reach the coordinator knows no leader, not its own stale record.
      leaderAddress: () => (!servers || servers.isLeader() ? advertised() : (servers.otherLeader()?.address ?? '')),
      peers: () => (servers ? servers.coordinator.servers().map((s) => s.address) : [advertised()]),
      servers: () =>
        servers
          ? { Datacenter: config.datacenter, ...servers.status() }
          : {
              Datacenter: config.datacenter,
              Leader: advertised(),
              Term: 1,
              SyncSet: [],
              RunningWithoutSyncCopy: false,
              Servers: [{ Name: config.node_name, Address: advertised(), Role: 'leader', Term: 1, AppliedSeq: store.serverPosition().seq, AppliedIndex: store.currentIndex(), LagBatches: 0, InSyncSet: false, Connected: true }],
            },
    };

    metrics.watchServers(() => agent.servers(), config.node_name);

    const peers = new Map<string, PeerClient>();
    const cluster: ClusterHooks = {
      datacenter: config.datacenter,
      addressOf: (dc) => directory.urlOf(dc),
      isPeer: (ip) =>
        (servers?.coordinator.servers().some((s) => hostOf(`http://${s.address}`) === ip) ?? false) ||
        (primaryRepl ? primaryRepl.isPeerAddress(ip) : directory.list().some((d) => d.name !== config.datacenter && hostOf(d.url) === ip)),
      ...(ha
        ? {
            follower: () => {
              const leader = leaderClient();
              if (leader) return { leader, waitForIndex: (index: number, ms: number) => waitForIndex(store, index, ms) };
              // No leader known yet: writes are refused, not made here.
              if (servers && !servers.isLeader()) {
                const problem = servers.coordinator.problem();
                throw new WatchwordError('NO_LEADER', `no leader is known in datacenter ${config.datacenter}${problem ? ` (this server ${problem})` : ' yet'}; try again shortly`);
              }
              return undefined;
            },
          }
        : {}),
      peer: (dc, url) => {
        let p = peers.get(url);
        if (!p) peers.set(url, (p = new PeerClient(url, dc)));
        return p;
      },
      ...(primaryClient
        ? {
            secondary: {
              primary: primaryClient,
              isLocalToken: async (id: string) => isUUID(id) && store.reader.getToken(id)?.Local === true,
              waitForApplied: (index: number, timeoutMs: number) => secondaryRepl?.waitForApplied(index, timeoutMs) ?? Promise.resolve(false),
              localView: async (kind: 'token' | 'policy' | 'role', id: string) => {
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
              currentIndex: () => store.currentIndex(),
            },
          }
        : {}),
    };

    const reads = new ReadGate(store, {
      gauge: metrics,
      authorize: readAuthorizer(resolver),
      maxBlocking: config.max_blocking_queries,
      maxBlockingPerClient: config.max_blocking_queries_per_client,
      ...(primaryClient || ha
        ? {
            beforeConsistentRead: async () => {
              const leader = leaderClient();
              if (leader) {
                // ?consistent at a follower: reach the leader's current index first.
                const index = await leader.currentIndex(2000);
                if (!(await waitForIndex(store, index, 2500))) {
                  throw new WatchwordError('NO_LEADER', `this server has not caught up with its leader (index ${index}); try again or read without ?consistent`);
                }
                return;
              }
              if (!primaryClient) return;
              // ?consistent on a secondary: reach the primary's current index first, within 5 s.
              const index = await primaryClient.currentIndex(2000);
              if (!(await (secondaryRepl?.waitForApplied(index, 2500) ?? Promise.resolve(false)))) {
                throw new WatchwordError('PRIMARY_UNAVAILABLE', `replication has not caught up with the primary (index ${index}); try again or read without ?consistent`);
              }
            },
          }
        : {}),
    });
    const replicationStatus = () =>
      secondaryRepl
        ? secondaryRepl.status()
        : {
            Enabled: false,
            Running: false,
            SourceDatacenter: config.datacenter,
            ReplicationType: 'tokens',
            ReplicatedIndex: store.currentIndex(),
            ReplicatedRoleIndex: store.currentIndex(),
            ReplicatedTokenIndex: store.currentIndex(),
            LastSuccess: '0001-01-01T00:00:00Z',
            LastError: '0001-01-01T00:00:00Z',
            LastErrorMessage: '',
            Connected: false,
            PrimaryIndex: store.currentIndex(),
            LagEntries: 0,
            LastContactMs: 0,
            Secondaries: primaryRepl?.secondaries() ?? [],
          };
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
      bootstrap,
      snapshots,
      agent,
      resolver,
      reads,
      metrics,
      replicationStatus,
      cluster,
      logger,
      limits: {
        requestTimeout: config.http_request_timeout,
        headerTimeout: config.http_header_timeout,
        keepAliveTimeout: config.http_keepalive_timeout,
        maxRequestsPerConn: config.http_max_requests_per_conn,
        maxConns: config.http_max_conns,
      },
      ...(rateLimit ? { rateLimit } : {}),
    });

    const repl = { ...DEFAULT_REPLICATION_OPTIONS, ...options.replication };
    app.server.on('upgrade', (req, socket, head) => {
      socket.on('error', () => undefined);
      const path = new URL(req.url ?? '/', 'http://server').pathname;
      if (path === SERVERS_PATH) {
        if (servers) return servers.handleUpgrade(req, socket, head, (status, message) => refuse(socket, status, message, leaderHeader()));
        return refuse(socket, 404, `datacenter ${config.datacenter} runs a single server`);
      }
      if (path !== REPLICATION_PATH) return refuse(socket, 404, `no WebSocket endpoint at ${path}`);
      if (!primary) {
        // Only the primary serves the replication stream; say so rather than drop the socket.
        return refuse(socket, 400, `datacenter ${config.datacenter} is a secondary; replication connects to the primary (${config.primary_datacenter}) at ${config.primary_address}`);
      }
      if (primaryRepl) return void primaryRepl.upgrade(req, socket, head);
      const leader = servers?.otherLeader();
      refuse(socket, 421, leader ? `this server is a follower; the leader of ${config.datacenter} is ${leader.name} at ${leader.address}` : `no leader is known in ${config.datacenter} yet`, leaderHeader());
    });
    const leaderHeader = (): Record<string, string> => {
      const leader = servers?.otherLeader();
      return leader && !servers?.isLeader() ? { 'X-Service-Leader': leader.address } : {};
    };

    /** What only the leader of a datacenter runs: replication with other datacenters and the reaper. */
    const startLeaderParts = async (): Promise<void> => {
      if (primary) {
        if (ha) {
          await bootstrap.ensureBuiltins();
          if (config.initial_management_token) await bootstrap.ensureInitialManagementToken(config.initial_management_token);
        }
        primaryRepl ??= new ReplicationPrimary(store, resolver, logger, { ...repl, retention: config.log_retention }, { datacenter: config.datacenter, address: advertised });
      } else {
        secondaryRepl = new ReplicationSecondary(store, logger, metrics, {
          datacenter: config.datacenter,
          primaryDatacenter: config.primary_datacenter,
          primaryAddress: config.primary_address as string,
          ...(config.replication_token ? { token: config.replication_token } : {}),
          address: advertised,
          heartbeatMs: repl.heartbeatMs,
          deadPeerMs: repl.deadPeerMs,
          backoffMinMs: repl.backoffMinMs,
          backoffMaxMs: repl.backoffMaxMs,
        });
        await secondaryRepl.start();
      }
      reaper.start();
    };
    const stopLeaderParts = async (): Promise<void> => {
      await reaper.stop();
      await secondaryRepl?.stop();
      secondaryRepl = undefined;
      await primaryRepl?.close();
      primaryRepl = undefined;
    };

    const reaper = new Reaper(store, clock, {
      interval: config.reap_interval,
      isPrimary: primary,
      onReaped: (count) => {
        metrics.reaped.inc(count);
        logger.info({ count }, 'reaped expired tokens');
      },
      onError: (err) => logger.error({ err }, 'reaper pass failed'),
    });

    // A single server leads from the start: secondaries that connect at once find the stream.
    if (primary && !ha) primaryRepl = new ReplicationPrimary(store, resolver, logger, { ...repl, retention: config.log_retention }, { datacenter: config.datacenter, address: advertised });

    const { host, port } = parseHostPort(config.http_addr) as { host: string; port: number };
    await app.listen({ host, port });
    const bound = app.server.address();
    const boundPort = typeof bound === 'object' && bound ? bound.port : port;
    address = `${host.includes(':') ? `[${host}]` : host}:${boundPort}`;
    await writeFile(join(dataDir, 'http-addr'), `${address}\n`, { mode: 0o600 });
    if (ha) {
      const self = { name: config.coordinator ? config.node_name : advertised(), address: advertised() };
      const coordinator: Coordinator = config.coordinator
        ? new EtcdCoordinator({
            endpoints: config.coordinator.slice('etcd://'.length).split(',').map((h) => `http://${h}`),
            datacenter: config.datacenter,
            self,
            leaseTTL: config.leader_lease / 1000,
            pollMs: options.servers?.pollMs ?? 250,
            logger,
          })
        : new StaticCoordinator(self, config.server_peers.map((a) => ({ name: a, address: a })));
      servers = new ServerGroup(store, coordinator, {
        name: self.name,
        address: advertised,
        token: config.replication_token ?? config.initial_management_token,
        syncFollowers: config.sync_followers,
        syncTimeoutMs: options.servers?.syncTimeoutMs ?? 2000,
        heartbeatMs: repl.heartbeatMs,
        deadPeerMs: repl.deadPeerMs,
        backoffMinMs: Math.min(repl.backoffMinMs, 250),
        backoffMaxMs: Math.min(repl.backoffMaxMs, 2000),
        tailBatches: 20_000,
        authenticate: (secret) => authenticateServer(resolver, secret),
        logger,
        onLead: startLeaderParts,
        onFollow: stopLeaderParts,
      });
      await servers.start();
    } else {
      await startLeaderParts();
    }
    logger.info({ address, datacenter: config.datacenter, primary: config.primary_datacenter, role: primary ? 'primary' : 'secondary', dataDir }, 'watchword agent started');

    let closing: Promise<void> | undefined;
    return {
      config,
      metrics,
      app,
      store,
      address,
      url: `http://${address}`,
      reaper,
      replication: () => replicationStatus(),
      get servers() {
        return servers;
      },
      close() {
        closing ??= (async () => {
          reads.shutdown();
          // Leadership is given up first (the lease revoked), so a successor need not wait for it to lapse.
          await servers?.stop();
          await secondaryRepl?.stop();
          await primaryRepl?.close();
          // Stop accepting and drop idle keep-alive sockets; requests in flight finish
          // (blocked reads were just released) within the grace time, then whatever
          // is left is cut: shutdown never waits on clients.
          const closed = app.close();
          await Promise.race([closed, new Promise((r) => setTimeout(r, SHUTDOWN_GRACE_MS).unref())]);
          app.server.closeAllConnections();
          await closed;
          await reaper.stop();
          await store.close();
          logger.info('watchword agent stopped');
        })();
        return closing;
      },
    };
  } catch (err) {
    await servers?.stop().catch(() => undefined);
    await secondaryRepl?.stop().catch(() => undefined);
    await primaryRepl?.close().catch(() => undefined);
    await store.close().catch(() => undefined);
    throw err;
  }
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

/** The host of a URL, brackets of an IPv6 literal removed. */
function hostOf(url: string): string | undefined {
  try {
    return new URL(url).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return undefined;
  }
}

/**
 * IDs chosen for a Local token at a secondary must not be any global token's accessor
 * or secret (both are checked both ways, as on create). An unreachable primary leaves
 * only the local checks: Local writes keep working while it is down.
 */
async function checkIDsOnPrimary(ids: { accessor?: string; secret?: string }, primary: PeerClient, replicationToken: string): Promise<void> {
  const inUse = async (id: string): Promise<boolean> => {
    if ((await primary.lookupSecret(id, 2000)).found) return true;
    if (!isUUID(id)) return false;
    const res = await primary.request('GET', `/v1/acl/token/${id}`, { 'X-Service-Token': replicationToken }, undefined, 2000);
    return res.status === 200;
  };
  try {
    if (ids.accessor && (await inUse(ids.accessor))) throw conflict('Invalid Token: AccessorID is already in use');
    if (ids.secret && (await inUse(ids.secret))) throw conflict('Invalid Token: SecretID is already in use');
  } catch (err) {
    if (isWatchwordError(err) && err.code === 'CONFLICT') throw err;
  }
}

/** A global token's chosen IDs must not be a Local token's at any connected secondary. */
async function checkIDsOnSecondaries(ids: { accessor?: string; secret?: string }, primary: ReplicationPrimary): Promise<void> {
  const wanted = [ids.accessor, ids.secret].filter((id): id is string => id !== undefined);
  const held = await primary.idsHeldBySecondaries(wanted);
  const by = (id: string | undefined) => held.find((h) => h.id === id);
  const accessor = by(ids.accessor);
  if (accessor) throw conflict(`Invalid Token: AccessorID is already in use (by a Local token in datacenter ${accessor.datacenter})`);
  const secret = by(ids.secret);
  if (secret) throw conflict(`Invalid Token: SecretID is already in use (by a Local token in datacenter ${secret.datacenter})`);
}

/**
 * A secret this secondary does not hold: ask the primary. When it knows the secret,
 * wait (briefly) for the token to replicate. Negative answers are kept for a second;
 * look-ups are limited per client (RATE_LIMITED past it).
 */
async function lookUpOnPrimary(
  secret: string,
  client: string | undefined,
  primary: PeerClient,
  waitForApplied: (index: number, timeoutMs: number) => Promise<boolean>,
  unknown: Map<string, number>,
  limiter: RateLimiter,
): Promise<boolean> {
  const now = Date.now();
  if ((unknown.get(secret) ?? 0) > now) return false;
  const wait = limiter.take(client ?? '');
  if (wait > 0) {
    throw new WatchwordError('RATE_LIMITED', `Too many unknown secrets from ${client ?? 'this client'}: secrets this datacenter does not hold are looked up at the primary at most ${limiter.rate} times per second per client`, { retryAfter: wait });
  }
  try {
    const { found, index } = await primary.lookupSecret(secret, 2000);
    if (!found) {
      if (unknown.size >= 10_000) unknown.clear();
      unknown.set(secret, now + 1000);
      return false;
    }
    return await waitForApplied(index, 3000);
  } catch {
    // The primary is unreachable: answer from the local replica.
    return false;
  }
}

/** Resolves true once the store's durable index reaches `index`, false after `timeoutMs`. */
function waitForIndex(store: LevelStore, index: number, timeoutMs: number): Promise<boolean> {
  if (store.currentIndex() >= index) return Promise.resolve(true);
  return new Promise((resolve) => {
    const off = store.onCommit((e) => {
      if (e.index >= index) finish(true);
    });
    const timer = setTimeout(() => finish(store.currentIndex() >= index), timeoutMs);
    function finish(ok: boolean): void {
      off();
      clearTimeout(timer);
      resolve(ok);
    }
  });
}

/** A follower streams with a token that has acl:write here, as a secondary replicates with one. */
function authenticateServer(resolver: AclResolver, secret: string | undefined): { ok: true } | { ok: false; status: number; message: string } {
  if (!secret) return { ok: false, status: 403, message: 'server token is missing (replication_token, or initial_management_token)' };
  try {
    const identity = resolver.resolveLocal(secret);
    if (!identity.authorizer.canWrite('default', 'default')) return { ok: false, status: 403, message: 'server token lacks acl:write' };
    return { ok: true };
  } catch (err) {
    if (isWatchwordError(err) && err.code === 'ACL_NOT_FOUND') return { ok: false, status: 403, message: 'server token is invalid' };
    return { ok: false, status: 500, message: 'internal error' };
  }
}
