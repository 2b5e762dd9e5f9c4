import { RequestMetrics } from './request-metrics.js';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { OperatorServersResponse } from '../api/schemas.js';
import type { InventoryResponse } from '../api/status-schemas.js';
import { TABLE_NAMES, type TableName } from '../store/schema.js';

/** What the metrics read from the store at scrape time. */
export interface StoreStats {
  currentIndex(): number;
  count(table: TableName): number;
}

/**
 * Prometheus metrics of one daemon, in a registry of its own (several daemons can share
 * a process in tests). Store sizes are read at scrape time; nothing is polled.
 */
/** Counts blocking reads in flight (the HTTP layer's long polls). */
export interface BlockingGauge {
  inc(): void;
  dec(): void;
}

export class Metrics implements BlockingGauge {
  readonly registry = new Registry();
  private inFlight = 0;

  /** Requests served and their latency (a plain-number form of a counter and a histogram: see request-metrics.ts). */
  private readonly requests = new RequestMetrics(this.registry);

  readonly authorizeChecks = new Counter({
    name: 'watchword_authorize_checks_total',
    help: 'Authorization checks judged by /v1/internal/acl/authorize, by answer',
    labelNames: ['allowed'] as const,
    registers: [this.registry],
  });

  readonly reaped = new Counter({
    name: 'watchword_tokens_reaped_total',
    help: 'Expired tokens deleted by the reaper',
    registers: [this.registry],
  });

  readonly blockingQueries = new Gauge({
    name: 'watchword_blocking_queries_in_flight',
    help: 'Blocking queries currently waiting for a change',
    registers: [this.registry],
  });

  readonly storeAvailable = new Gauge({
    name: 'watchword_store_available',
    help: '1 while the store accepts writes, 0 while it refuses them after a write error (it retries by itself)',
    registers: [this.registry],
  });

  readonly replicationConnected = new Gauge({
    name: 'watchword_replication_connected',
    help: '1 when this secondary is connected to the primary, else 0',
    registers: [this.registry],
  });

  readonly replicationAppliedIndex = new Gauge({
    name: 'watchword_replication_applied_index',
    help: 'Last primary change-log index applied by this secondary',
    registers: [this.registry],
  });

  readonly replicationLagEntries = new Gauge({
    name: 'watchword_replication_lag_entries',
    help: 'Change-log entries the primary has that this secondary has not applied',
    registers: [this.registry],
  });

  readonly replicationLagMs = new Gauge({
    name: 'watchword_replication_lag_milliseconds',
    help: 'Time from the primary making the last applied batch durable until this secondary applied it',
    registers: [this.registry],
  });

  readonly replicationApplyLag = new Histogram({
    name: 'watchword_replication_apply_lag_seconds',
    help: 'Per replicated change: time from durable on the primary until applied here (clocks assumed in sync)',
    buckets: [0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  constructor(store: StoreStats) {
    this.storeAvailable.set(1);
    new Gauge({
      name: 'watchword_objects_stored',
      help: 'Objects stored in this datacenter, by table',
      labelNames: ['table'] as const,
      registers: [this.registry],
      collect() {
        for (const table of TABLE_NAMES) this.set({ table }, store.count(table));
      },
    });
    new Gauge({
      name: 'watchword_index',
      help: 'Highest durable index of this datacenter',
      registers: [this.registry],
      collect() {
        this.set(store.currentIndex());
      },
    });
    collectDefaultMetrics({ register: this.registry, prefix: 'watchword_' });
  }

  /**
   * The servers of this datacenter (docs/servers.md, "Several servers per datacenter"), read at scrape time from the operator
   * view: this server's role and term, and each server's lag and synchronous-set
   * membership as this server sees them (complete on the leader).
   */
  /** replication_max_stale: 1 while global tokens are refused because the primary has been silent too long. */
  watchStaleness(refusing: () => boolean): void {
    new Gauge({
      name: 'watchword_replication_refusing_global_tokens',
      help: '1 while this secondary refuses global tokens: the primary has been silent longer than replication_max_stale',
      registers: [this.registry],
      collect() {
        this.set(refusing() ? 1 : 0);
      },
    });
  }

  /**
   * The inventory of tokens (docs/http-api.md, "Inventory"), read at scrape time: the totals, the
   * counts by auth method, role, policy, namespace and partition (at most INVENTORY_LABELS names
   * each, the largest; the rest summed under `other`), and each quota's use and limit.
   */
  watchInventory(counts: () => InventoryResponse): void {
    let last: { at: number; value: InventoryResponse } | undefined;
    // One computation per scrape, whichever gauge asks first.
    const now = () => {
      const t = Date.now();
      if (last === undefined || t - last.at > 1000) last = { at: t, value: counts() };
      return last.value;
    };
    new Gauge({
      name: 'watchword_inventory_tokens',
      help: 'Live tokens held here: total, local, global, expiring_1h, expiring_24h, never_used, unused_30d, acl_write',
      labelNames: ['kind'] as const,
      registers: [this.registry],
      collect() {
        const c = now();
        const kinds: Array<[string, number]> = [
          ['total', c.Tokens],
          ['local', c.Local],
          ['global', c.Global],
          ['expiring_1h', c.ExpiringWithin1h],
          ['expiring_24h', c.ExpiringWithin24h],
          ['never_used', c.NeverUsed],
          ['unused_30d', c.UnusedFor30d],
          ['acl_write', c.ACLWriteHolders],
        ];
        for (const [kind, n] of kinds) this.set({ kind }, n);
      },
    });
    new Gauge({
      name: 'watchword_inventory_tokens_by',
      help: `Live tokens by auth_method, role, policy, namespace or partition (the ${INVENTORY_LABELS} largest of each; the rest as "other")`,
      labelNames: ['by', 'name'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        const c = now();
        const groups: Array<[string, Record<string, number>]> = [
          ['auth_method', c.ByAuthMethod],
          ['role', c.ByRole],
          ['policy', c.ByPolicy],
          ['namespace', c.ByNamespace],
          ['partition', c.ByPartition],
        ];
        for (const [by, counts] of groups) for (const [name, n] of boundedLabels(counts)) this.set({ by, name }, n);
      },
    });
    new Gauge({
      name: 'watchword_quota_tokens',
      help: 'Live tokens each quota counts here (used) and its MaxTokens (max, when it has one)',
      labelNames: ['quota', 'kind'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const q of now().Quotas.slice(0, INVENTORY_LABELS)) {
          this.set({ quota: q.Name, kind: 'used' }, q.Used);
          if (q.MaxTokens !== undefined) this.set({ quota: q.Name, kind: 'max' }, q.MaxTokens);
        }
      },
    });
  }

  /** Compiled authorizers held for tokens used since they last changed (a token's goes when it is written or deleted). */
  watchCompiledAuthorizers(size: () => number): void {
    new Gauge({
      name: 'watchword_acl_authorizers_cached',
      help: 'Compiled authorizers held for tokens used since they, a policy or a role last changed',
      registers: [this.registry],
      collect() {
        this.set(size());
      },
    });
  }

  /**
   * Enforcing clients' watches (docs/enforcing-client.md, "Enforcing policies in your service"): connections, tokens
   * watched over them, bytes waiting to be sent to them (in all, and to the one holding most), and
   * watches closed for passing a daemon-wide bound.
   */
  watchAuthorizerWatches(
    size: () => { connections: number; tokens: number; queuedBytes: number; queuedBytesMax: number; closedForBounds: number },
  ): void {
    const gauges = [
      ['watchword_authorizer_watches', "Enforcing clients' watch connections open to this server", 'connections'],
      [
        'watchword_authorizer_watched_tokens',
        "Tokens watched over enforcing clients' watch connections (a token watched by two clients counts twice)",
        'tokens',
      ],
      ['watchword_authorizer_watch_queued_bytes', 'Bytes waiting to be sent to every watch together', 'queuedBytes'],
      ['watchword_authorizer_watch_queued_bytes_max', 'Bytes waiting to be sent to the watch that holds most', 'queuedBytesMax'],
      [
        'watchword_authorizer_watches_closed_for_bounds',
        'Watches closed since start because every watch together held too many bytes or tokens (the largest went first)',
        'closedForBounds',
      ],
    ] as const;
    for (const [name, help, field] of gauges)
      new Gauge({
        name,
        help,
        registers: [this.registry],
        collect() {
          this.set(size()[field]);
        },
      });
  }

  watchServers(compute: () => OperatorServersResponse, self: string): void {
    const registers = [this.registry];
    // One view per scrape, not one per gauge: the gauges below are collected together.
    let cached: { at: number; value: OperatorServersResponse } | undefined;
    const view = (): OperatorServersResponse => {
      const now = Date.now();
      if (!cached || now - cached.at > 100) cached = { at: now, value: compute() };
      return cached.value;
    };
    new Gauge({
      name: 'watchword_server_is_leader',
      help: '1 while this server leads its datacenter, else 0',
      registers,
      collect() {
        this.set(view().Servers.find((s) => s.Name === self)?.Role === 'leader' ? 1 : 0);
      },
    });
    new Gauge({
      name: 'watchword_server_term',
      help: 'Leadership term this server knows',
      registers,
      collect() {
        this.set(view().Term);
      },
    });
    new Gauge({
      name: 'watchword_server_running_without_sync_copy',
      help: '1 while this leader acknowledges writes no other server holds (its synchronous set is empty)',
      registers,
      collect() {
        this.set(view().RunningWithoutSyncCopy ? 1 : 0);
      },
    });
    new Gauge({
      name: 'watchword_server_leader_problem',
      help:
        '1 while this server sees no working leader: the coordinator out of reach, or the leader named there refusing this server ' +
        'for longer than a lease',
      registers,
      collect() {
        this.set(view().Problem === null ? 0 : 1);
      },
    });
    new Gauge({
      name: 'watchword_server_applied_seq',
      help: 'Last server batch durable on each server, as this server sees it',
      labelNames: ['server'] as const,
      registers,
      collect() {
        this.reset();
        for (const s of view().Servers) this.set({ server: s.Name }, s.AppliedSeq);
      },
    });
    new Gauge({
      name: 'watchword_server_lag_batches',
      help: "Batches of the leader's log a server has not made durable, as this server sees it",
      labelNames: ['server'] as const,
      registers,
      collect() {
        this.reset();
        for (const s of view().Servers) this.set({ server: s.Name }, s.LagBatches);
      },
    });
    new Gauge({
      name: 'watchword_server_in_sync_set',
      help: '1 for a server in the published synchronous set, else 0',
      labelNames: ['server'] as const,
      registers,
      collect() {
        this.reset();
        for (const s of view().Servers) this.set({ server: s.Name }, s.InSyncSet ? 1 : 0);
      },
    });
  }

  inc(): void {
    this.inFlight++;
    this.blockingQueries.inc();
  }

  dec(): void {
    this.inFlight--;
    this.blockingQueries.dec();
  }

  /** Blocking queries waiting right now. */
  blockingInFlight(): number {
    return this.inFlight;
  }

  /** Requests answered since the start (what the reaper paces itself against). */
  answeredCount = 0;

  observeRequest(method: string, route: string, status: number, seconds: number): void {
    this.answeredCount++;
    this.requests.observe(method, route, status, seconds);
  }
}

/** Names a metric of the inventory shows at most, of each kind: the rest are summed as `other`. */
export const INVENTORY_LABELS = 100;

/** The name the tokens made through the token API (auth method "") are shown under: no auth method can be named so. */
export const TOKEN_API_LABEL = '(token-api)';

/** The largest INVENTORY_LABELS counts by name, and the rest summed as `other` (the empty name as TOKEN_API_LABEL). */
export function boundedLabels(counts: Record<string, number>): Array<[string, number]> {
  const all = Object.entries(counts).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  const shown = all.slice(0, INVENTORY_LABELS).map(([k, n]): [string, number] => [k === '' ? TOKEN_API_LABEL : k, n]);
  const rest = all.slice(INVENTORY_LABELS).reduce((sum, [, n]) => sum + n, 0);
  return rest > 0 ? [...shown, ['other', rest]] : shown;
}
