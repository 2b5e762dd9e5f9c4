import type { Duplex } from 'node:stream';
import { rename, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { type Config, type ConfigKey, configKeys } from './config/schema.js';
import { Placement } from './replication/placement.js';
import { type Clock, systemClock } from './domain/clock.js';
import { isWatchwordError } from './domain/errors.js';
import { createAgentLogger } from './observability/logger.js';
import type { Metrics } from './observability/metrics.js';
import { Reaper } from './reaper/reaper.js';
import { LastUseFlusher } from './store/last-use.js';
import type { Selectors } from './auth/selectors.js';
import { UpgradeStatus } from './upgrade-status.js';
import { logStartNotices } from './start-notices.js';
import type { AgentInfo } from './service/context.js';
import { agentSelf, healthChecks } from './agent-info.js';
import type { LevelStore, LevelStoreOptions } from './store/level-store.js';
import { DatacenterDirectory } from './replication/directory.js';
import type { ServerGroup } from './ha/servers.js';
import { type ClusterRole, DEFAULT_REPLICATION_OPTIONS } from './ha/cluster-role.js';
import { createClusterRole } from './ha/create-role.js';
import type { ReplicationStatusResponse } from './api/schemas.js';
import { Transport } from './transport/transport.js';
import { VERSION } from './version.js';
import { type AuditLog, systemActor } from './observability/audit.js';
import { META } from './store/schema.js';
import type { DataDirLock } from './store/data-dir-lock.js';
import { auditSettings, openDataDir } from './data-dir.js';
import { type Http, type PlaceDeps, buildHttp, listen, refusalAuditor } from './daemon-http.js';
import { buildRoleParts, buildServices } from './daemon-services.js';

/** The settings a reload (SIGHUP) applies; TLS files are re-read too. */
const RELOADABLE: readonly ConfigKey[] = [
  'log_level',
  'http_max_conns',
  'http_max_conns_per_client',
  'login_rate',
  'login_burst',
  'audit_log',
  'audit_log_path',
  'audit_log_mode',
  'audit_log_rotate_bytes',
  'audit_log_rotate_max_files',
  'tls_cert_file',
  'tls_key_file',
  'tls_ca_file',
];

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
  /**
   * SIGHUP: re-reads the TLS certificate, key and CA (false when they could not be used; the old
   * ones stay) and, given the configuration read again, applies the log level, connection and
   * login limits and the audit settings (anything else needs a restart, and the log says so).
   */
  reload(next?: Config): boolean;
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
  /** Lines of how this daemon was configured, logged once it has started (the agent's process knows where settings came from). */
  notices?: string[];
}

/** How long a stopping server in a cluster keeps answering, each answer closing its connection, before its listener closes (ms). */
const DRAIN_MS = 500;

/** Longest wait for in-flight requests on shutdown, ms. */
const SHUTDOWN_GRACE_MS = 10_000;

export { VERSION } from './version.js';

/**
 * The composition root: opens the store, builds services, HTTP and the reaper, and
 * starts them in order. Nothing serves before the store is open; close() stops in the
 * reverse order and leaves the store flushed. Each step is a builder below, in the order
 * they run after the data dir is open (data-dir.ts): the server's place, the services, what
 * the role runs, HTTP, listening.
 */
export async function startDaemon(config: Config, options: DaemonOptions = {}): Promise<Daemon> {
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? (await agentLogger(config));
  const dataDir = resolve(config.data_dir);
  // Certificates are checked before anything else: a bad file is one line and exit 1, with nothing opened.
  const transport = new Transport({
    datacenter: config.datacenter,
    tls: config.tls,
    etcd: config.etcd,
    serverKey: config.server_key,
    logger,
  });
  const { lock, store, audit, metrics } = await openDataDir(config, dataDir, options.storeFaults, logger);
  // Forwarding keys between datacenters derive from this datacenter's own key (made by its first leader).
  transport.useDatacenterKey(() => store.getMeta(META.auditKey) as Uint8Array | undefined);
  /** host:port once bound; other datacenters reach this daemon at advertise_addr, else there. */
  let address = '';
  const advertised = (): string => config.advertise_addr ?? address;
  // The server's place first: the services below are built from what it offers (look-ups of
  // secrets held elsewhere, checks of chosen IDs), and it gets theirs when it starts.
  const placement = placementOf(config, store);
  const cluster = clusterRoleOf(config, { store, placement, metrics, logger, transport, audit, advertised }, options);
  // The cluster's versions: what GET /v1/operator/upgrade says, a finalize, and the gate of features that need every server.
  const upgrades = new UpgradeStatus(config, cluster, cluster.releases, (details) =>
    audit.record('upgrade-finalized', systemActor('watchword'), 200, details),
  );
  try {
    const services = buildServices(config, { store, clock, cluster, placement, audit, dataDir, logger, upgrades });
    metrics.watchCompiledAuthorizers(() => services.resolver.cachedAuthorizers);
    metrics.watchInventory(() => services.inventory.counts());
    if (!placement.isPrimary() && config.initial_management_token) {
      logger.warn('initial_management_token is only used by the primary; ignored on this secondary');
    }
    const reaper = buildReaper(config, { store, clock, metrics, logger, placement });
    const lastUse = lastUseFlusher(config, store, cluster, logger);
    const roleParts = buildRoleParts(config, store, services, reaper, lastUse, placement);
    const directory = new DatacenterDirectory({
      datacenter: config.datacenter,
      primary: () => placement.now(),
      configured: Object.fromEntries(Object.entries(config.datacenter_addresses).map(([dc, url]) => [dc, transport.peerURL(url)])),
      ownURL: () => transport.peerURL(advertised()),
      peerURL: (peer) => transport.peerURL(peer),
      reported: () => cluster.reportedDatacenters(),
    });
    const agent = buildAgentInfo(config, { store, metrics, cluster, transport, audit, directory, address: () => address }, upgrades);
    const http = buildHttp(config, { store, metrics, cluster, transport, audit, directory, services, agent, logger, dataDir });
    const upgraded = new Set<Duplex>();
    const draining = { now: false };
    address = await listen(config, http.app, {
      transport,
      cluster,
      logger,
      auditRefusal: refusalAuditor(store, audit),
      watchSockets: http.watchSockets,
      upgraded,
      draining,
    });
    await cluster.start(roleParts);
    http.history.start();
    upgrades.startAuto();
    await announce(dataDir, address);
    logger.info(
      { address, datacenter: config.datacenter, primary: placement.primaryDatacenter(), role: cluster.kind, dataDir },
      'watchword agent started',
    );
    logStartNotices(config, {
      logger,
      placement,
      bootstrapped: store.reader.getBootstrap().Bootstrapped,
      url: transport.peerURL(advertised()),
      notices: options.notices ?? [],
    });
    return daemonHandle(config, {
      lock,
      store,
      metrics,
      audit,
      cluster,
      transport,
      reaper,
      lastUse,
      http,
      logger,
      dataDir,
      address,
      selectors: services.selectors,
      upgraded,
      upgrades,
      draining,
    });
  } catch (err) {
    await cluster.stop().catch(() => undefined);
    await store.close().catch(() => undefined);
    await audit.close().catch(() => undefined);
    await lock.release().catch(() => undefined);
    throw err;
  }
}

/** The server's place (ha/): its datacenter's side and, with etcd, its place among its datacenter's servers. */
function clusterRoleOf(
  config: Config,
  deps: {
    store: LevelStore;
    placement: Placement;
    metrics: Metrics;
    logger: Logger;
    transport: Transport;
    audit: AuditLog;
    advertised: () => string;
  },
  options: DaemonOptions,
): ClusterRole {
  const { store, placement, metrics, logger, transport, audit, advertised } = deps;
  return createClusterRole({
    config,
    placement,
    store,
    metrics,
    logger,
    replication: {
      ...DEFAULT_REPLICATION_OPTIONS,
      backoffMinMs: config.replication_backoff_min,
      backoffMaxMs: config.replication_backoff_max,
      ...options.replication,
    },
    transport,
    ...(options.servers ? { serverTimings: options.servers } : {}),
    advertised,
    onEvent: (type, details) => audit.record(type, systemActor('watchword'), 200, details),
  });
}

/** The flusher of last uses: a leader writes its datacenter's; a secondary's leader sends its global tokens' on to the primary. */
function lastUseFlusher(config: Config, store: LevelStore, cluster: ClusterRole, logger: Logger): LastUseFlusher {
  return new LastUseFlusher(
    store,
    config.last_used_flush,
    (err) =>
      // A server that no longer leads (stepped down, or stopping) has nobody to write them for: its successor keeps its own.
      isWatchwordError(err) && err.code === 'NO_LEADER'
        ? logger.info('last uses seen since the last flush not written: this server no longer leads')
        : logger.warn({ err }, 'last uses not written; tried again at the next flush'),
    (uses) => cluster.usesWritten(uses),
  );
}

/** Which datacenter is the primary: the store's word once a promotion or a newer primary moved it (docs/datacenters.md), else the configuration's. */
function placementOf(config: Config, store: LevelStore): Placement {
  return new Placement(store, {
    datacenter: config.datacenter,
    primaryDatacenter: config.primary_datacenter,
    primaryAddresses: config.placement.role === 'secondary' ? config.placement.primaryAddresses : [],
  });
}

function agentLogger(config: Config): Promise<Logger> {
  return createAgentLogger({
    level: config.log_level,
    ...(config.log_format ? { format: config.log_format } : {}),
    ...(config.log_file ? { file: config.log_file } : {}),
    rotateBytes: config.log_rotate_bytes,
    maxFiles: config.log_rotate_max_files,
  });
}

/** The reaper of expired tokens, logging and counting what it deletes. */
function buildReaper(
  config: Config,
  deps: { store: LevelStore; clock: Clock; metrics: Metrics; logger: Logger; placement: Placement },
): Reaper {
  return new Reaper(deps.store, deps.clock, {
    interval: config.reap_interval,
    isPrimary: () => deps.placement.isPrimary(),
    idleTTL: config.login_token_idle_ttl,
    // A use at a follower or in another datacenter reaches the leader within a flush and a heartbeat or two.
    idleGrace: config.last_used_flush + 10_000,
    busy: answeredSince(deps.metrics),
    compact: () => deps.store.compactDeleted(),
    onReaped: (count, reason) => {
      deps.metrics.reaped.inc(count);
      deps.logger.info({ count, reason }, reason === 'idle' ? 'revoked idle login tokens' : 'reaped expired tokens');
    },
    onError: (err) => deps.logger.error({ err }, 'reaper pass failed'),
  });
}

/** Whether requests were answered since it was last asked (the reaper's pace). */
function answeredSince(metrics: Metrics): () => boolean {
  let seen = metrics.answeredCount;
  return () => {
    const now = metrics.answeredCount;
    const busy = now !== seen;
    seen = now;
    return busy;
  };
}

/**
 * Announced once this server has taken its place (a single primary has its built-ins by now).
 * Written whole then renamed: whoever polls for the file never reads it half written.
 */
async function announce(dataDir: string, address: string): Promise<void> {
  const addrFile = join(dataDir, 'http-addr');
  await writeFile(`${addrFile}.tmp`, `${address}\n`, { mode: 0o600 });
  await rename(`${addrFile}.tmp`, addrFile);
}

/** What the agent endpoints say of this daemon (agent-info.ts), and the gauges that follow it. */
function buildAgentInfo(config: Config, deps: PlaceDeps & { address: () => string }, upgrades: UpgradeStatus): AgentInfo {
  const { store, metrics, cluster, transport, audit, directory, address } = deps;
  const agent: AgentInfo = {
    datacenter: config.datacenter,
    primaryDatacenter: config.primary_datacenter,
    nodeName: config.node_name,
    version: VERSION,
    defaultPolicy: config.default_policy,
    downPolicy: config.down_policy,
    address,
    knownLeader: () => cluster.knownLeader(),
    lastContactMs: () => cluster.lastContactMs(),
    datacenters: () => directory.list().map((d) => d.name),
    self: (operatorRead) => agentSelf(config, address(), store, metrics, cluster, transport, operatorRead),
    leaderAddress: () => cluster.leaderAddress(),
    isLeader: () => cluster.isLeader(),
    health: () => healthChecks(config, address(), store, cluster, audit),
    peers: () => cluster.peers(),
    servers: () => cluster.servers(),
    primary: () => cluster.primaryStatus(),
    promote: (force) => cluster.promote(force),
    transfer: (target) => cluster.transfer(target),
    transferLeader: (to, by) => cluster.transferLeader(to, by),
    placement: () => cluster.placementAnswer(),
    upgrade: () => upgrades.status(),
    finalize: () => upgrades.finalize(),
  };
  metrics.watchServers(() => agent.servers(), config.node_name);
  if (config.replication_max_stale > 0) {
    metrics.watchStaleness(() => (cluster.primarySilentForMs() ?? 0) > config.replication_max_stale);
  }
  return agent;
}

/** What the running daemon holds: what it offers, reloads and stops. */
interface RunningParts {
  lock: DataDirLock;
  store: LevelStore;
  metrics: Metrics;
  audit: AuditLog;
  cluster: ClusterRole;
  transport: Transport;
  reaper: Reaper;
  lastUse: LastUseFlusher;
  http: Http;
  logger: Logger;
  dataDir: string;
  address: string;
  selectors: Selectors;
  /** Upgraded connections still open (streams, watches). */
  upgraded: Set<Duplex>;
  upgrades: UpgradeStatus;
  draining: { now: boolean };
}

/** The running daemon: what it offers, a reload (SIGHUP), and a stop in the reverse order of the start. */
function daemonHandle(config: Config, parts: RunningParts): Daemon {
  const { store, metrics, cluster, transport, reaper, http, address } = parts;
  return {
    config,
    metrics,
    app: http.app,
    store,
    address,
    url: transport.peerURL(address),
    reaper,
    replication: () => cluster.replicationStatus(),
    get servers() {
      return cluster.group;
    },
    reload: reloader(config, parts),
    close: stopper(parts),
  };
}

/** A reload (SIGHUP): TLS files read again, and what may change of the configuration applied; the rest named as needing a restart. */
function reloader(config: Config, parts: RunningParts): (next?: Config) => boolean {
  const { store, audit, transport, http, logger, dataDir } = parts;
  const { app } = http;
  /** The configuration in force (a reload replaces what may change). */
  let current = config;
  return (next?: Config) => {
    const tls = transport.reload();
    if (!next) return tls;
    // What a reload may change; anything else needs a restart.
    const changed = RELOADABLE.filter((k) => JSON.stringify(next[k]) !== JSON.stringify(current[k]));
    logger.level = next.log_level;
    http.limits.maxConns = next.http_max_conns;
    http.limits.maxConnsPerClient = next.http_max_conns_per_client;
    app.server.maxConnections = next.http_max_conns;
    http.loginRate.rate = next.login_rate;
    http.loginRate.burst = next.login_burst;
    const settings = auditSettings(next, dataDir);
    void audit.reload(settings).then(
      () => store.setAudit(settings.enabled ? audit : undefined),
      (err: unknown) => logger.error({ err: (err as Error).message }, 'audit: cannot apply the new audit settings; the old ones stay'),
    );
    const ignored = configKeys.filter((k) => !RELOADABLE.includes(k) && JSON.stringify(next[k]) !== JSON.stringify(current[k]));
    if (ignored.length > 0) logger.warn({ settings: ignored }, 'reload: these settings change only with a restart');
    current = next;
    audit.record('reload', systemActor('SIGHUP'), 200, {
      Changed: changed,
      TLSReloaded: tls,
      ...(ignored.length > 0 ? { NeedRestart: ignored } : {}),
    });
    logger.info({ changed }, 'reload: configuration applied');
    return tls;
  };
}

/** The stop, once however often it is asked for: in the reverse order of the start, the store flushed and the data dir unlocked last. */
function stopper(parts: RunningParts): () => Promise<void> {
  const { lock, store, audit, cluster, transport, reaper, lastUse, http, logger, selectors, upgraded, upgrades, draining } = parts;
  const { app } = http;
  let closing: Promise<void> | undefined;
  return () => {
    closing ??= (async () => {
      // Peers and clients that keep connections open are told, answer by answer, to take their next request elsewhere,
      // before the listener closes: none sends a request on a connection this server is closing (a rolling restart
      // refuses nothing). A daemon alone in its cluster skips the wait.
      if (cluster.group !== undefined || cluster.kind === 'secondary' || cluster.reportedDatacenters().length > 0) {
        draining.now = true;
        app.server.closeIdleConnections();
        await new Promise((r) => setTimeout(r, DRAIN_MS));
      }
      http.reads.shutdown();
      http.watches.close();
      upgrades.stop();
      http.history.stop();
      // The last uses written while this server may still write them (a leader's are its datacenter's).
      await lastUse.flushIfRunning();
      // Leadership is given up first (the lease revoked), so a successor need not wait for it to lapse.
      await cluster.stop();
      // Stop accepting and drop idle keep-alive sockets; requests in flight finish
      // (blocked reads were just released) within the grace time, then whatever
      // is left is cut: shutdown never waits on clients.
      const closed = app.close();
      await Promise.race([closed, new Promise((r) => setTimeout(r, SHUTDOWN_GRACE_MS).unref())]);
      app.server.closeAllConnections();
      // Upgraded connections (streams, watches) are not the server's to close: ended here, so the stop never waits on a peer.
      for (const socket of upgraded) socket.destroy();
      await closed;
      await reaper.stop();
      await lastUse.stop();
      await selectors.close();
      await transport.close();
      await store.close();
      await audit.close();
      // Last: until here another daemon must not take the data dir (the checkpoint was written at the store's close).
      await lock.release();
      logger.info('watchword agent stopped');
    })();
    return closing;
  };
}
