import { hostname } from 'node:os';
import { z } from 'zod';
import { type Placement, type ServerMode, type TlsSettings, placementOf, serverModeOf, tlsOf } from './placement.js';
import { setting } from './setting-doc.js';
import {
  bool,
  commaList,
  datacenterAddresses,
  datacenterName,
  duration,
  filePath,
  hostPort,
  httpURL,
  isWildcardHost,
  listenAddress,
  parseHostPort,
  rotateBytes,
  serverKey,
} from './values.js';

export { isWildcardHost, parseHostPort } from './values.js';
export { peerBaseURL } from './placement.js';
export type { Placement, ServerMode, TlsSettings };

/**
 * Every agent setting. Keys are snake_case; each is also a flag (`--http-addr`) and an
 * environment variable (`WATCHWORD_HTTP_ADDR`).
 */
export const configShape = {
  /** Name of this daemon's datacenter. */
  datacenter: setting({ arg: 'NAME', help: 'name of this datacenter' }, datacenterName.default('dc1')),
  /** The primary datacenter; this daemon is the primary when it equals `datacenter`. */
  primary_datacenter: setting({ arg: 'NAME', help: 'the primary datacenter', defaultText: 'this one' }, datacenterName.optional()),
  /** HTTP base URL of the primary's daemon (secondaries). */
  primary_address: setting(
    { arg: 'URL', help: "HTTP base URL of the primary's daemon (required on a secondary)" },
    z
      .string()
      .refine((v) => v.split(',').every((u) => httpURL.safeParse(u.trim()).success || parseHostPort(u.trim()) !== undefined), {
        message: 'expected an http:// or https:// URL or HOST:PORT (or several, comma-separated: every server of the primary datacenter)',
      })
      .optional(),
  ),
  /** Secret of a token with acl:write on the primary, used to replicate (secondaries). */
  replication_token: setting(
    { arg: 'SECRET', help: 'token with acl:write on the primary, used to replicate (secondary)' },
    z.string().min(1).optional(),
  ),
  /** Secondaries: refuse global tokens once the primary has been silent for longer than this (0: never). */
  replication_max_stale: setting(
    { arg: 'DURATION', help: 'secondary: refuse global tokens once the primary has been silent longer than this, e.g. 30s; 0: never' },
    duration.default(0),
  ),
  /** Secondaries: the wait before reconnecting to the primary, doubling from min to max. */
  replication_backoff_min: setting(
    { arg: 'DURATION', help: 'secondary: first wait before reconnecting to the primary, doubling up to the max' },
    duration.default(250),
  ),
  replication_backoff_max: setting(
    { arg: 'DURATION', help: 'secondary: longest wait before reconnecting to the primary' },
    duration.default(2000),
  ),
  /** How often replication lag is sampled for the web UI's one-hour chart. */
  replication_history_interval: setting(
    { arg: 'DURATION', help: 'how often replication lag is sampled for the web UI chart' },
    duration.default(10_000),
  ),
  /** Where the LevelDB store and runtime files live; default ./data/<datacenter>. */
  data_dir: setting({ arg: 'DIR', help: 'data directory', defaultText: './data/<datacenter>' }, z.string().min(1).optional()),
  /** Address the HTTP API listens on. */
  http_addr: setting({ arg: 'HOST:PORT', help: 'HTTP listen address; port 0 picks a free port' }, listenAddress.default('127.0.0.1:8500')),
  /** Address other datacenters reach this daemon at (default: http_addr, unless that is a wildcard). */
  advertise_addr: setting(
    { arg: 'HOST:PORT', help: 'address other datacenters reach this daemon at', defaultText: 'the bound address' },
    hostPort.optional(),
  ),
  /** Other datacenters' daemons, NAME=URL; preferred over the addresses they report. */
  datacenter_addresses: setting(
    { arg: 'NAME=URL,…', help: "other datacenters' daemons; preferred over the addresses they report" },
    datacenterAddresses.default({}),
  ),
  /** Secret of a management token to create at start-up (primary). */
  initial_management_token: setting(
    { arg: 'SECRET', help: 'create a management token with this secret at start-up (primary)' },
    z
      .string()
      .regex(/^[\x21-\x7e]{1,256}$/, 'expected 1 to 256 printable ASCII characters without spaces (it is sent in a header)')
      .optional(),
  ),
  /** Name of this node, reported by expanded reads and /v1/agent/self. */
  node_name: setting(
    { arg: 'NAME', help: 'name of this node', defaultText: 'host name' },
    z
      .string()
      .regex(/^[\x21-\x7e]{1,128}$/, 'expected 1 to 128 printable ASCII characters without spaces')
      .default(hostname()),
  ),
  /** The audit log (on by default): every ACL write, bootstrap, snapshot, login and refusal, one JSON line each. */
  audit_log: setting({ arg: 'BOOL', help: 'write the audit log' }, bool.default(true)),
  /** Where the audit log is written (default <data_dir>/audit/audit.log). */
  audit_log_path: setting(
    { arg: 'FILE', help: 'where the audit log goes', defaultText: '<data-dir>/audit/audit.log' },
    z.string().min(1).optional(),
  ),
  /** best-effort: a failing audit write is logged and counted; enforced: writes are refused (503) when their line cannot be written. */
  audit_log_mode: setting(
    {
      arg: 'MODE',
      help: 'best-effort (a failing audit write is logged) | enforced (writes refused with 503 when their audit line cannot be written)',
    },
    z.enum(['best-effort', 'enforced']).default('best-effort'),
  ),
  /** The audit log is rotated past this size. */
  audit_log_rotate_bytes: setting({ arg: 'BYTES', help: 'rotate the audit log past this size' }, rotateBytes),
  /** Rotated audit files kept (audit.log.1 … .N). */
  audit_log_rotate_max_files: setting({ arg: 'N', help: 'rotated audit files kept' }, z.coerce.number().int().min(1).max(1000).default(10)),
  /** json or text; default: text on a terminal, JSON otherwise. */
  log_format: setting(
    { arg: 'FORMAT', help: 'json|text', defaultText: 'text on a terminal, JSON otherwise' },
    z.enum(['json', 'text']).optional(),
  ),
  /** Also log to this file (JSON lines), rotated by size. */
  log_file: setting({ arg: 'FILE', help: 'also log to FILE (JSON lines), rotated by size' }, z.string().min(1).optional()),
  /** The log file is rotated past this size. */
  log_rotate_bytes: setting({ arg: 'BYTES', help: 'rotate the log file past this size' }, rotateBytes),
  /** Rotated log files kept. */
  log_rotate_max_files: setting({ arg: 'N', help: 'rotated log files kept' }, z.coerce.number().int().min(1).max(1000).default(5)),
  /** Log level. */
  log_level: setting(
    { arg: 'LEVEL', help: 'trace|debug|info|warn|error|fatal|silent' },
    z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
  ),
  /** What enforcing clients are told to do when the daemon cannot be reached (reported as AgentACLDownPolicy; Consul's acl.down_policy). */
  down_policy: setting(
    { arg: 'POLICY', help: 'extend-cache|async-cache|deny|allow, reported to enforcing clients as AgentACLDownPolicy' },
    z.enum(['extend-cache', 'async-cache', 'deny', 'allow']).default('extend-cache'),
  ),
  /** What happens when no rule decides: deny, or allow (read, never ACL write). */
  default_policy: setting({ arg: 'POLICY', help: 'allow|deny when no rule decides' }, z.enum(['allow', 'deny']).default('deny')),
  /**
   * Who may grant what (docs/security.md, "Grants limited to the granter's own"): consul, any holder of acl:write
   * grants any rule (Consul's behaviour); holder, a token, role or policy is made or changed only with rules the
   * caller holds itself.
   */
  acl_grant_limit: setting(
    { arg: 'MODE', help: 'consul (acl:write grants anything) | holder (only rules the caller holds)' },
    z.enum(['consul', 'holder']).default('consul'),
  ),
  /** Shortest token lifetime accepted on create. */
  token_min_ttl: setting({ arg: 'DURATION', help: 'shortest token lifetime on create' }, duration.default(60_000)),
  /** Longest token lifetime accepted on create. */
  token_max_ttl: setting({ arg: 'DURATION', help: 'longest token lifetime on create' }, duration.default(24 * 3_600_000)),
  /** How often the reaper looks for expired tokens. */
  reap_interval: setting({ arg: 'DURATION', help: 'how often expired tokens are reaped' }, duration.default(1_000)),
  /** How often tokens' last uses are written (docs/http-api.md, "Last use"): a crash loses at most this much of them. */
  last_used_flush: setting({ arg: 'DURATION', help: "how often tokens' last uses are written" }, duration.default(60_000)),
  /**
   * Whether the checks asked in the last hour are noted (decisions here, enforcing clients' reports), for dry runs
   * (docs/operator-insight.md, "What a change would break").
   */
  recent_checks: setting({ arg: 'BOOL', help: 'note the checks asked in the last hour, for dry runs' }, bool.default(true)),
  /**
   * How far back the noted checks reach (kept in four buckets of a quarter of it each); a dry run judges what was asked
   * within it. Their memory is bounded per bucket, so a shorter window holds less.
   */
  recent_checks_window: setting(
    { arg: 'DURATION', help: 'how far back the checks noted for dry runs reach' },
    duration
      .pipe(
        z
          .number()
          .min(60_000, 'must be at least 1m')
          .max(7 * 24 * 3_600_000, 'must be at most 168h'),
      )
      .default(3_600_000),
  ),
  /** Login tokens unused this long are revoked by the reaper; 0 turns it off (an auth method's TokenIdleTTL overrides). */
  login_token_idle_ttl: setting({ arg: 'DURATION', help: 'revoke login tokens unused this long; 0 off' }, duration.default(72 * 3_600_000)),
  /** fsync: a write is acknowledged once synced to disk. os: once handed to the OS. */
  durability: setting(
    { arg: 'MODE', help: 'fsync (acknowledge after sync) | os (after handing to the OS)' },
    z.enum(['fsync', 'os']).default('fsync'),
  ),
  /** Requests per second allowed per client address; 0 turns rate limiting off. */
  rate_limit: setting(
    { arg: 'N', help: 'requests per second per client address; 0 = no limit' },
    z.coerce.number().min(0).max(1_000_000).default(0),
  ),
  /** Requests a client may send in a burst above the rate (default: one second's worth). */
  rate_limit_burst: setting(
    { arg: 'N', help: 'requests a client may burst above the rate', defaultText: 'the rate' },
    z.coerce.number().int().min(0).max(10_000_000).optional(),
  ),
  /** Blocking queries (`?index=`) held at once, in all; past it, 429. */
  max_blocking_queries: setting(
    { arg: 'N', help: 'blocking queries held at once in all; past it 429' },
    z.coerce.number().int().min(1).max(10_000_000).default(20_000),
  ),
  /** Blocking queries held at once per client address; past it, 429 (below http_max_conns_per_client: each holds a connection). */
  max_blocking_queries_per_client: setting(
    { arg: 'N', help: 'blocking queries held at once per client address; past it 429' },
    z.coerce.number().int().min(1).max(10_000_000).default(150),
  ),
  /** Longest a client may take to send a whole request, headers and body (blocking waits do not count). */
  http_request_timeout: setting(
    { arg: 'DURATION', help: 'longest a client may take to send a whole request; blocking waits do not count' },
    duration.default(30_000),
  ),
  /** Longest a client may take to send a request's headers (at most http_request_timeout). */
  http_header_timeout: setting(
    { arg: 'DURATION', help: "longest a client may take to send a request's headers" },
    duration.default(10_000),
  ),
  /** How long an idle keep-alive connection stays open. */
  http_keepalive_timeout: setting({ arg: 'DURATION', help: 'idle keep-alive connections close after this' }, duration.default(5_000)),
  /** Requests served on one keep-alive connection before it is closed (0: no limit). */
  http_max_requests_per_conn: setting(
    { arg: 'N', help: 'requests per keep-alive connection before it closes; 0 = no limit' },
    z.coerce.number().int().min(0).max(10_000_000).default(0),
  ),
  /** Open HTTP connections at once; connections past it are dropped. */
  http_max_conns: setting(
    { arg: 'N', help: 'open HTTP connections at once; more are dropped' },
    z.coerce.number().int().min(1).max(10_000_000).default(20_000),
  ),
  /**
   * Open HTTP connections at once from one client address (0: no cap), as Consul's 200; above
   * max_blocking_queries_per_client, which each hold one. An enforcing client needs two at most
   * (its watch of every cached token, and one for first look-ups).
   */
  http_max_conns_per_client: setting(
    { arg: 'N', help: 'open HTTP connections at once from one client address; more are dropped; 0: no cap' },
    z.coerce.number().int().min(0).max(10_000_000).default(200),
  ),
  /**
   * Host names (`name` or `name:port`) requests may be addressed to. A daemon listening only on
   * loopback answers loopback names at its port and these; elsewhere, when set, only these.
   */
  http_allowed_hosts: setting(
    {
      arg: 'HOST,…',
      help: 'Host names (name or name:port) requests may be addressed to; on loopback, loopback names at the port are always allowed',
    },
    commaList(z.string().min(1).max(300)).default([]),
  ),
  /** Requests per second a peer daemon may forward in all (its clients keep their own rate_limit); default 10 × rate_limit. */
  rate_limit_peer: setting(
    { arg: 'N', help: 'requests per second a peer daemon may forward in all', defaultText: '10 x rate-limit' },
    z.coerce.number().min(0).max(10_000_000).optional(),
  ),
  /**
   * Secrets no token holds (never made, deleted long ago) presented per client address per
   * second, at any door (a request's token, a watch entry); past it, 429. A burst of five
   * seconds' worth.
   */
  unknown_secret_rate: setting(
    { arg: 'N', help: 'secrets no token holds presented per client address per second, at any door; past it 429' },
    z.coerce.number().min(0.1).max(1_000_000).default(20),
  ),
  /** Bytes waiting to be sent to one enforcing client's watch past which it is not read until it drains. */
  watch_max_queued_bytes: setting(
    { arg: 'BYTES', help: "bytes waiting for one enforcing client's watch past which it is not read" },
    z.coerce
      .number()
      .int()
      .min(64 * 1024)
      .max(1024 ** 3)
      .default(1 << 20),
  ),
  /** Bytes waiting to be sent to every watch together; past it the watches holding most are closed. */
  watch_max_total_bytes: setting(
    { arg: 'BYTES', help: 'bytes waiting for every watch together; past it the largest are closed' },
    z.coerce
      .number()
      .int()
      .min(1 << 20)
      .max(1024 ** 4)
      .default(64 << 20),
  ),
  /** The primary's leader finalizes an upgrade by itself once every server runs this release (docs/upgrading.md, "Upgrading"). */
  upgrade_auto_finalize: setting(
    { arg: 'BOOL', help: "the primary's leader finalizes an upgrade once every server runs this release" },
    bool.default(false),
  ),
  /** Tokens every watch together holds; past it the watches holding most are closed. */
  watch_max_tokens: setting(
    { arg: 'N', help: 'tokens every watch together holds; past it the largest are closed' },
    z.coerce.number().int().min(1).max(100_000_000).default(2_000_000),
  ),
  /** Secondaries: look-ups at the primary of secrets not held here, per client address per second. */
  secret_lookup_rate: setting(
    { arg: 'N', help: 'secondary: look-ups of unknown secrets at the primary per client per second' },
    z.coerce.number().min(0.1).max(1_000_000).default(10),
  ),
  /**
   * Servers of this datacenter (docs/servers.md, "Several servers per datacenter"), HOST:PORT of each, this one included;
   * without a coordinator the first leads.
   */
  server_peers: setting(
    { arg: 'HOST:PORT,…', help: "this datacenter's servers, this one included; without --coordinator the first leads" },
    commaList(hostPort).default([]),
  ),
  /** Leader election for several servers per datacenter: etcd://HOST:PORT[,HOST:PORT…] (etcds:// or https:// for etcd over TLS). */
  coordinator: setting(
    { arg: 'etcd://HOST:PORT,…', help: 'elect the leader of several servers through etcd (etcds:// over TLS)' },
    z
      .string()
      .regex(/^(etcd|etcds|http|https):\/\/[^\s,/]+(,[^\s,/]+)*$/, 'expected etcd://HOST:PORT[,HOST:PORT…] (or etcds:// for TLS)')
      .optional(),
  ),
  /** PEM CA etcd's certificate is checked against (etcds://). */
  etcd_ca_file: setting({ arg: 'FILE', help: "PEM CA that signs etcd's certificate (etcds://)" }, filePath.optional()),
  /** PEM client certificate presented to etcd (its --client-cert-auth). */
  etcd_cert_file: setting({ arg: 'FILE', help: 'PEM client certificate for etcd' }, filePath.optional()),
  /** PEM key of etcd_cert_file. */
  etcd_key_file: setting({ arg: 'FILE', help: 'PEM key of --etcd-cert-file' }, filePath.optional()),
  /** etcd user (etcd auth). */
  etcd_username: setting({ arg: 'USER', help: 'etcd user (etcd auth)' }, z.string().min(1).optional()),
  /** Password of etcd_username. */
  etcd_password: setting({ arg: 'PASSWORD', help: 'password of --etcd-username' }, z.string().min(1).optional()),
  /** PEM CA that signs every server's certificate (and clients', with tls_verify_incoming). */
  tls_ca_file: setting({ arg: 'FILE', help: "PEM CA that signs the servers' (and clients') certificates" }, filePath.optional()),
  /** This server's PEM certificate, naming server.<datacenter>.<domain>; with tls_key_file, the API speaks HTTPS only. */
  tls_cert_file: setting(
    { arg: 'FILE', help: "this server's PEM certificate (server.<dc>.<domain>); with --tls-key-file the API speaks HTTPS only" },
    filePath.optional(),
  ),
  /** PEM key of tls_cert_file. */
  tls_key_file: setting({ arg: 'FILE', help: 'PEM key of --tls-cert-file' }, filePath.optional()),
  /** Every HTTPS client must present a certificate signed by tls_ca_file. Servers always must. */
  tls_verify_incoming: setting(
    { arg: 'BOOL', help: 'every HTTPS client must present a certificate signed by the CA; servers always must' },
    bool.default(false),
  ),
  /** Peers' certificates are checked against tls_ca_file. */
  tls_verify_outgoing: setting({ arg: 'BOOL', help: "check peers' certificates against the CA" }, bool.default(true)),
  /** A peer's certificate must name server.<its datacenter>.<domain>. */
  tls_verify_server_hostname: setting({ arg: 'BOOL', help: "a peer's certificate must name server.<its dc>.<domain>" }, bool.default(true)),
  /** Domain of the server names in certificates. */
  tls_domain: setting(
    { arg: 'DOMAIN', help: 'domain of server names in certificates' },
    z
      .string()
      .regex(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/, 'expected a DNS domain such as watchword')
      .max(200)
      .default('watchword'),
  ),
  /** Oldest TLS version accepted and offered. */
  tls_min_version: setting({ arg: 'VERSION', help: 'TLSv1.2|TLSv1.3' }, z.enum(['TLSv1.2', 'TLSv1.3']).default('TLSv1.2')),
  /** Several servers without TLS: the key they prove themselves to each other with (32 bytes, base64). */
  server_key: setting(
    { arg: 'BASE64', help: 'several servers without TLS: the shared key they prove themselves with (watchword keygen)' },
    serverKey.optional(),
  ),
  /** Lease of the leader in the coordinator; a dead leader is replaced within about twice this. */
  leader_lease: setting({ arg: 'DURATION', help: "the leader's lease in the coordinator, whole seconds" }, duration.default(5_000)),
  /** Followers that must hold a write before it is acknowledged, when that many are connected and current. */
  sync_followers: setting(
    { arg: 'N', help: 'followers that must hold a write before it is acknowledged, when connected' },
    z.coerce.number().int().min(0).max(10).default(1),
  ),
  /** Hosts (`name` or `name:port`) auth methods may fetch from; empty: any (https, or http to this machine). */
  auth_method_allowed_hosts: setting(
    { arg: 'HOST,…', help: 'hosts (name or name:port) auth methods may fetch from; empty: any' },
    commaList(z.string().min(1).max(300)).default([]),
  ),
  /** Logins per second per client address (0: no limit); beyond it, 429. */
  login_rate: setting(
    { arg: 'N', help: 'logins per second per client address; 0 = no limit' },
    z.coerce.number().min(0).max(1_000_000).default(10),
  ),
  /** Logins a client may send in a burst above login_rate. */
  login_burst: setting(
    { arg: 'N', help: 'logins a client may burst above login_rate' },
    z.coerce.number().int().min(1).max(1_000_000).default(20),
  ),
  /** Largest snapshot a restore accepts, bytes (413 past it). */
  snapshot_max_bytes: setting(
    { arg: 'BYTES', help: 'largest snapshot a restore accepts; 413 past it' },
    z.coerce
      .number()
      .int()
      .min(1024)
      .max(64 * 1024 ** 3)
      .default(512 * 1024 ** 2),
  ),
  /** Change-log entries the primary keeps for secondaries to resume from. */
  log_retention: setting(
    { arg: 'N', help: 'change-log entries the primary keeps for secondaries' },
    z.coerce.number().int().min(10).max(100_000_000).default(100_000),
  ),
} as const;

export type ConfigKey = keyof typeof configShape;

export const configKeys = Object.keys(configShape) as ConfigKey[];

export const configSchema = z
  .strictObject(configShape)
  .superRefine((c, ctx) => {
    if (c.replication_backoff_min > c.replication_backoff_max) {
      ctx.addIssue({ code: 'custom', path: ['replication_backoff_min'], message: 'must not exceed replication_backoff_max' });
    }
    if (c.token_min_ttl > c.token_max_ttl) {
      ctx.addIssue({ code: 'custom', path: ['token_min_ttl'], message: 'must not exceed token_max_ttl' });
    }
    if (c.last_used_flush < 10) {
      ctx.addIssue({ code: 'custom', path: ['last_used_flush'], message: 'must be at least 10ms' });
    }
    if (c.reap_interval < 10) {
      ctx.addIssue({ code: 'custom', path: ['reap_interval'], message: 'must be at least 10ms' });
    }
    if (c.advertise_addr !== undefined) {
      const a = parseHostPort(c.advertise_addr);
      if (a && (isWildcardHost(a.host) || a.port === 0)) {
        ctx.addIssue({
          code: 'custom',
          path: ['advertise_addr'],
          message: 'must name a reachable host and port, not a wildcard address or port 0',
        });
      }
    }
    if (c.leader_lease < 1000 || c.leader_lease % 1000 !== 0) {
      ctx.addIssue({ code: 'custom', path: ['leader_lease'], message: 'must be a whole number of seconds, at least 1s' });
    }
    // Settings that mean nothing alone: both or neither.
    for (const [a, b] of [
      ['tls_cert_file', 'tls_key_file'],
      ['etcd_cert_file', 'etcd_key_file'],
      ['etcd_username', 'etcd_password'],
    ] as const) {
      if ((c[a] === undefined) !== (c[b] === undefined))
        ctx.addIssue({ code: 'custom', path: [c[a] === undefined ? a : b], message: `${a} and ${b} go together` });
    }
    const several = c.coordinator !== undefined || c.server_peers.length > 1;
    if (several && c.tls_cert_file === undefined && c.server_key === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['server_key'],
        message:
          'is required: several servers without TLS prove themselves to each other with a shared key (make one with `watchword ' +
          'keygen`), never with an ACL token',
      });
    }
    if (several && c.tls_cert_file !== undefined && c.tls_ca_file === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['tls_ca_file'],
        message: "is required with several servers over TLS: each checks the others' certificates against it",
      });
    }
    const primary = c.primary_datacenter ?? c.datacenter;
    if (primary !== c.datacenter && c.primary_address === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['primary_address'],
        message: `is required on a secondary (datacenter ${c.datacenter}, primary ${primary})`,
      });
    }
  })
  .transform((c) => {
    const primaryDatacenter = c.primary_datacenter ?? c.datacenter;
    return {
      ...c,
      http_header_timeout: Math.min(c.http_header_timeout, c.http_request_timeout),
      primary_datacenter: primaryDatacenter,
      data_dir: c.data_dir ?? `./data/${c.datacenter}`,
      placement: placementOf(c.datacenter, primaryDatacenter, c.primary_address, c.tls_cert_file !== undefined),
      servers: serverModeOf(c.coordinator, c.server_peers, c.leader_lease, c.sync_followers),
      tls: tlsOf(c),
      etcd: {
        caFile: c.etcd_ca_file,
        certFile: c.etcd_cert_file,
        keyFile: c.etcd_key_file,
        ...(c.etcd_username !== undefined && c.etcd_password !== undefined
          ? { auth: { username: c.etcd_username, password: c.etcd_password } }
          : {}),
      },
    };
  });

/** The validated, frozen agent configuration. Durations are milliseconds. */
export type Config = Readonly<z.output<typeof configSchema>>;

export const isPrimary = (c: Config): boolean => c.placement.role === 'primary';
