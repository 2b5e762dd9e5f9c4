import { hostname } from 'node:os';
import { z } from 'zod';
import { parseDuration } from '../domain/duration.js';

const DC_RE = /^[a-z0-9]([a-z0-9\-_]*[a-z0-9])?$/;

const datacenterName = z
  .string()
  .regex(DC_RE, 'expected a datacenter name of lowercase letters, digits, "-" and "_"')
  .max(64);

const duration = z.union([z.string(), z.number()]).transform((value, ctx) => {
  const ms = typeof value === 'number' ? value : parseDuration(value);
  if (ms === undefined || !Number.isFinite(ms) || ms < 0) {
    ctx.addIssue({ code: 'custom', message: `expected a duration such as "90s" or "1h30m", got ${JSON.stringify(value)}` });
    return z.NEVER;
  }
  return ms;
});

const hostPort = z.string().refine((v) => parseHostPort(v) !== undefined, {
  message: 'expected HOST:PORT with a port from 0 to 65535 (0 picks a free port)',
});

/** Whether a host is a wildcard bind address, which says nothing about where to reach a daemon. */
export const isWildcardHost = (host: string): boolean => host === '' || host === '0.0.0.0' || host === '::' || host === '[::]' || host === '::0';

export function parseHostPort(value: string): { host: string; port: number } | undefined {
  const m = /^(\[[^\]]+\]|[^:\s]+):(\d{1,5})$/.exec(value);
  if (!m) return undefined;
  const port = Number(m[2]);
  if (port > 65535) return undefined;
  return { host: (m[1] as string).replace(/^\[|\]$/g, ''), port };
}

const httpURL = z.string().refine(
  (v) => {
    try {
      const u = new URL(v);
      return u.protocol === 'http:' || u.protocol === 'https:';
    } catch {
      return false;
    }
  },
  { message: 'expected an http:// or https:// URL' },
);

/**
 * Addresses of other datacenters' daemons an operator vouches for, as
 * `{"dc2": "http://10.0.0.2:8500"}` in a config file or `dc2=http://…,dc3=http://…` in a
 * flag or the environment. They win over addresses datacenters report for themselves.
 */
const datacenterAddresses = z
  .union([
    z.string().transform((v, ctx) => {
      const out: Record<string, string> = {};
      for (const part of v.split(',').map((p) => p.trim()).filter(Boolean)) {
        const eq = part.indexOf('=');
        if (eq <= 0) {
          ctx.addIssue({ code: 'custom', message: `expected NAME=URL pairs separated by commas, got ${JSON.stringify(part)}` });
          return z.NEVER;
        }
        out[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
      }
      return out;
    }),
    z.record(z.string(), z.unknown()),
  ])
  .pipe(z.record(datacenterName, httpURL));

/**
 * Every agent setting. Keys are snake_case; each is also a flag (`--http-addr`) and an
 * environment variable (`WATCHWORD_HTTP_ADDR`).
 */
export const configShape = {
  /** Name of this daemon's datacenter. */
  datacenter: datacenterName.default('dc1'),
  /** The primary datacenter; this daemon is the primary when it equals `datacenter`. */
  primary_datacenter: datacenterName.optional(),
  /** HTTP base URL of the primary's daemon (secondaries). */
  primary_address: z
    .string()
    .refine((v) => v.split(',').every((u) => httpURL.safeParse(u.trim()).success), { message: 'expected an http:// or https:// URL (or several, comma-separated: every server of the primary datacenter)' })
    .optional(),
  /** Secret of a token with acl:write on the primary, used to replicate (secondaries). */
  replication_token: z.string().min(1).optional(),
  /** Where the LevelDB store and runtime files live; default ./data/<datacenter>. */
  data_dir: z.string().min(1).optional(),
  /** Address the HTTP API listens on. */
  http_addr: hostPort.default('127.0.0.1:8500'),
  /** Address other datacenters reach this daemon at (default: http_addr, unless that is a wildcard). */
  advertise_addr: hostPort.optional(),
  /** Other datacenters' daemons, NAME=URL; preferred over the addresses they report. */
  datacenter_addresses: datacenterAddresses.default({}),
  /** Secret of a management token to create at start-up (primary). */
  initial_management_token: z.string().min(1).max(256).optional(),
  /** Name of this node, reported by expanded reads and /v1/agent/self. */
  node_name: z.string().min(1).max(128).default(hostname()),
  /** Log level. */
  log_level: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
  /** What happens when no rule decides: deny, or allow (read, never ACL write). */
  default_policy: z.enum(['allow', 'deny']).default('deny'),
  /** Shortest token lifetime accepted on create. */
  token_min_ttl: duration.default(60_000),
  /** Longest token lifetime accepted on create. */
  token_max_ttl: duration.default(24 * 3_600_000),
  /** How often the reaper looks for expired tokens. */
  reap_interval: duration.default(1_000),
  /** fsync: a write is acknowledged once synced to disk. os: once handed to the OS. */
  durability: z.enum(['fsync', 'os']).default('fsync'),
  /** Requests per second allowed per client address; 0 turns rate limiting off. */
  rate_limit: z.coerce.number().min(0).max(1_000_000).default(0),
  /** Requests a client may send in a burst above the rate (default: one second's worth). */
  rate_limit_burst: z.coerce.number().int().min(0).max(10_000_000).optional(),
  /** Blocking queries (`?index=`) held at once, in all; past it, 429. */
  max_blocking_queries: z.coerce.number().int().min(1).max(10_000_000).default(20_000),
  /** Blocking queries held at once per client address; past it, 429. */
  max_blocking_queries_per_client: z.coerce.number().int().min(1).max(10_000_000).default(2_000),
  /** Longest a client may take to send a whole request, headers and body (blocking waits do not count). */
  http_request_timeout: duration.default(30_000),
  /** Longest a client may take to send a request's headers (at most http_request_timeout). */
  http_header_timeout: duration.default(10_000),
  /** How long an idle keep-alive connection stays open. */
  http_keepalive_timeout: duration.default(5_000),
  /** Requests served on one keep-alive connection before it is closed (0: no limit). */
  http_max_requests_per_conn: z.coerce.number().int().min(0).max(10_000_000).default(0),
  /** Open HTTP connections at once; connections past it are dropped. */
  http_max_conns: z.coerce.number().int().min(1).max(10_000_000).default(20_000),
  /** Requests per second a peer daemon may forward in all (its clients keep their own rate_limit); default 10 × rate_limit. */
  rate_limit_peer: z.coerce.number().min(0).max(10_000_000).optional(),
  /** Secondaries: look-ups at the primary of secrets not held here, per client address per second. */
  secret_lookup_rate: z.coerce.number().min(0.1).max(1_000_000).default(10),
  /** Servers of this datacenter (HA, §13), HOST:PORT of each, this one included; without a coordinator the first leads. */
  server_peers: z
    .union([z.string().transform((v) => v.split(',').map((p) => p.trim()).filter(Boolean)), z.array(z.string())])
    .pipe(z.array(hostPort))
    .default([]),
  /** Leader election for several servers per datacenter: etcd://HOST:PORT[,HOST:PORT…]. */
  coordinator: z
    .string()
    .regex(/^etcd:\/\/[^\s,]+(,[^\s,]+)*$/, 'expected etcd://HOST:PORT[,HOST:PORT…]')
    .optional(),
  /** Lease of the leader in the coordinator; a dead leader is replaced within about twice this. */
  leader_lease: duration.default(5_000),
  /** Followers that must hold a write before it is acknowledged, when that many are connected and current. */
  sync_followers: z.coerce.number().int().min(0).max(10).default(1),
  /** Change-log entries the primary keeps for secondaries to resume from. */
  log_retention: z.coerce.number().int().min(10).max(100_000_000).default(100_000),
} as const;

export type ConfigKey = keyof typeof configShape;

export const configKeys = Object.keys(configShape) as ConfigKey[];

export const configSchema = z
  .strictObject(configShape)
  .superRefine((c, ctx) => {
    if (c.token_min_ttl > c.token_max_ttl) {
      ctx.addIssue({ code: 'custom', path: ['token_min_ttl'], message: 'must not exceed token_max_ttl' });
    }
    if (c.reap_interval < 10) {
      ctx.addIssue({ code: 'custom', path: ['reap_interval'], message: 'must be at least 10ms' });
    }
    if (c.advertise_addr !== undefined) {
      const a = parseHostPort(c.advertise_addr);
      if (a && (isWildcardHost(a.host) || a.port === 0)) {
        ctx.addIssue({ code: 'custom', path: ['advertise_addr'], message: 'must name a reachable host and port, not a wildcard address or port 0' });
      }
    }
    if (c.leader_lease < 1000 || c.leader_lease % 1000 !== 0) {
      ctx.addIssue({ code: 'custom', path: ['leader_lease'], message: 'must be a whole number of seconds, at least 1s' });
    }
    const primary = c.primary_datacenter ?? c.datacenter;
    if (primary !== c.datacenter && c.primary_address === undefined) {
      ctx.addIssue({ code: 'custom', path: ['primary_address'], message: `is required on a secondary (datacenter ${c.datacenter}, primary ${primary})` });
    }
  })
  .transform((c) => {
    const primaryDatacenter = c.primary_datacenter ?? c.datacenter;
    return {
      ...c,
      http_header_timeout: Math.min(c.http_header_timeout, c.http_request_timeout),
      primary_datacenter: primaryDatacenter,
      data_dir: c.data_dir ?? `./data/${c.datacenter}`,
      placement: placementOf(c.datacenter, primaryDatacenter, c.primary_address),
      servers: serverModeOf(c.coordinator, c.server_peers, c.leader_lease, c.sync_followers),
    };
  });

/**
 * This datacenter's place among the others (SPEC §6): the primary, or a secondary
 * that knows where the primary's servers are.
 */
export type Placement =
  | { readonly role: 'primary' }
  | {
      readonly role: 'secondary';
      /** Every configured server of the primary datacenter (primary_address), in order. */
      readonly primaryAddresses: readonly string[];
    };

/** How many servers this datacenter runs and how its leader is chosen (SPEC §13). */
export type ServerMode =
  | { readonly kind: 'single' }
  | { readonly kind: 'static'; readonly peers: readonly string[]; readonly syncFollowers: number }
  | { readonly kind: 'etcd'; readonly endpoints: readonly string[]; readonly leaseMs: number; readonly syncFollowers: number };

function placementOf(datacenter: string, primaryDatacenter: string, primaryAddress: string | undefined): Placement {
  if (datacenter === primaryDatacenter) return { role: 'primary' };
  // The refinement above guarantees an address on a secondary.
  return { role: 'secondary', primaryAddresses: (primaryAddress ?? '').split(',').map((u) => u.trim()).filter(Boolean) };
}

function serverModeOf(coordinator: string | undefined, peers: string[], leaseMs: number, syncFollowers: number): ServerMode {
  if (coordinator !== undefined) return { kind: 'etcd', endpoints: coordinator.slice('etcd://'.length).split(',').map((h) => `http://${h}`), leaseMs, syncFollowers };
  if (peers.length > 1) return { kind: 'static', peers, syncFollowers };
  return { kind: 'single' };
}

/** The validated, frozen agent configuration. Durations are milliseconds. */
export type Config = Readonly<z.output<typeof configSchema>>;

export const isPrimary = (c: Config): boolean => c.placement.role === 'primary';
