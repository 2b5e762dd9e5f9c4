import { resolve } from 'node:path';
import type { Config } from './config/schema.js';
import { formatDuration } from './domain/duration.js';
import type { ClusterRole } from './ha/cluster-role.js';
import type { AuditLog } from './observability/audit.js';
import type { Metrics } from './observability/metrics.js';
import type { HealthCheck } from './service/context.js';
import type { LevelStore } from './store/level-store.js';
import type { Transport } from './transport/transport.js';
import { VERSION, releaseInfo } from './version.js';

// What the agent endpoints say of this daemon (/v1/agent/self, /v1/agent/health), from its parts.

/** /v1/agent/self: the configuration without secrets (only whether they are set), version and role. */
export function agentSelf(
  config: Config,
  address: string,
  store: LevelStore,
  metrics: Metrics,
  cluster: ClusterRole,
  transport: Transport,
  operatorRead: boolean,
) {
  const tls = config.tls;
  return {
    Config: {
      Datacenter: config.datacenter,
      PrimaryDatacenter: cluster.primaryStatus().Datacenter,
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
      Protocols: releaseInfo().Protocols,
      StoreFormats: releaseInfo().StoreFormats,
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
      return {
        Available: h.available,
        LastError: h.lastError ?? '',
        UnavailableSince: h.since === undefined ? null : new Date(h.since).toISOString(),
      };
    })(),
    Stats: {
      Index: store.currentIndex(),
      Tokens: store.count('tokens'),
      Roles: store.count('roles'),
      Policies: store.count('policies'),
      BlockingQueries: metrics.blockingInFlight(),
      TokenGarbageBytes: store.tables.tokens.memory?.garbageBytes ?? 0,
      TokenCompactions: store.tables.tokens.memory?.compactions ?? 0,
    },
  };
}

/** /v1/agent/health: each check by name, passing or not, with a line saying why. */
export function healthChecks(config: Config, address: string, store: LevelStore, cluster: ClusterRole, audit: AuditLog): HealthCheck[] {
  const primary = cluster.kind === 'primary';
  const checks: HealthCheck[] = [];
  const h = store.health();
  checks.push({
    Name: 'store',
    Passing: h.available,
    Output: h.available ? 'the store takes writes' : `the store refuses writes: ${h.lastError ?? ''}`,
  });
  const leader = cluster.isLeader() ? address : cluster.leaderAddress();
  checks.push({
    Name: 'leader',
    Passing: leader !== '',
    Output: leader ? `the leader is ${leader}` : 'no leader is known in this datacenter',
  });
  // A follower serves reads from what its leader streamed: not streaming, it would answer from an old state.
  const stream = cluster.group !== undefined && !cluster.isLeader() ? cluster.group.followerStatus() : undefined;
  if (stream !== undefined)
    checks.push({
      Name: 'stream',
      Passing: stream.Connected,
      Output: stream.Connected
        ? `streaming from the leader ${stream.Leader}`
        : `not streaming from the leader: ${stream.LastError || 'connecting'}`,
    });
  // The server of a secondary that replicates (its leader): failing until it first has, and while its last error is newer than its last success.
  if (!primary && cluster.isLeader()) checks.push(replicationCheck(cluster.replicationStatus()));
  if (!primary && config.replication_max_stale > 0) {
    const silent = cluster.primarySilentForMs() ?? 0;
    const ok = silent <= config.replication_max_stale;
    checks.push({
      Name: 'primary',
      Passing: ok,
      Output: `the primary was last heard ${Math.round(silent)} ms ago (replication_max_stale ${config.replication_max_stale} ms)`,
    });
  }
  const auditDown = audit.unavailable;
  if (config.audit_log && config.audit_log_mode === 'enforced')
    checks.push({
      Name: 'audit',
      Passing: auditDown === undefined,
      Output: auditDown ? `the audit log cannot be written (${auditDown.message}); writes are refused` : 'the audit log is written',
    });
  return checks;
}

/** A time the replication status never set (Consul's zero time). */
const NEVER = '0001-01-01T00:00:00Z';

function replicationCheck(r: ReturnType<ClusterRole['replicationStatus']>): HealthCheck {
  const why = r.LastErrorMessage || (r.Running ? 'connecting' : 'not running');
  if (r.LastSuccess === NEVER)
    return { Name: 'replication', Passing: false, Output: `has not replicated from ${r.SourceDatacenter} yet: ${why}` };
  // Both are RFC 3339 times of the same form: their order is their text's.
  if (r.LastError !== NEVER && r.LastError > r.LastSuccess)
    return { Name: 'replication', Passing: false, Output: `replication from ${r.SourceDatacenter} failing since ${r.LastError}: ${why}` };
  return {
    Name: 'replication',
    Passing: true,
    Output: `replicating from ${r.SourceDatacenter}: index ${r.ReplicatedIndex}, last success ${r.LastSuccess}`,
  };
}
