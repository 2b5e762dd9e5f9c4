import type { FastifyReply, FastifyRequest } from 'fastify';
import { invalid } from '../domain/errors.js';
import { parseDuration } from '../domain/duration.js';
import type { Store, WatchTable } from '../store/store.js';
import { queryFlag, queryParam } from './request.js';
import { sendJSONText, toJSONText } from './respond.js';

export const DEFAULT_WAIT_MS = 5 * 60_000;
export const MAX_WAIT_MS = 10 * 60_000;

export type Consistency = 'default' | 'stale' | 'consistent';

export interface BlockingParams {
  /** Block until the table index exceeds this; 0 means answer at once. */
  index: number;
  /** How long to wait at most, ms (jitter not included). */
  wait: number;
  consistency: Consistency;
}

/** Parses `index`, `wait`, `stale` and `consistent`, with Consul's messages for bad values. */
export function blockingParams(request: FastifyRequest): BlockingParams {
  const rawIndex = queryParam(request, 'index');
  let index = 0;
  if (rawIndex !== undefined && rawIndex !== '') {
    if (!/^\d{1,16}$/.test(rawIndex)) throw invalid('Invalid index');
    index = Number(rawIndex);
  }
  const rawWait = queryParam(request, 'wait');
  let wait = DEFAULT_WAIT_MS;
  if (rawWait !== undefined && rawWait !== '') {
    const ms = parseDuration(rawWait);
    if (ms === undefined || ms < 0) throw invalid('Invalid wait time');
    wait = Math.min(ms, MAX_WAIT_MS);
  }
  const stale = queryFlag(request, 'stale');
  const consistent = queryFlag(request, 'consistent');
  if (stale && consistent) throw invalid('Cannot specify ?stale with ?consistent, conflicting semantics.');
  return { index, wait, consistency: consistent ? 'consistent' : stale ? 'stale' : 'default' };
}

export interface BlockingGauge {
  inc(): void;
  dec(): void;
}

/**
 * Waits, when asked to, until `table` changes past `params.index`, the wait (plus up
 * to wait/16 of jitter) runs out, or the client goes away. Costs one timer and one
 * waiter entry per request; nothing polls.
 */
async function waitForChange(
  store: Store,
  table: WatchTable,
  params: BlockingParams,
  reply: FastifyReply,
  waiting: Set<AbortController> | undefined,
  gauge?: BlockingGauge,
): Promise<void> {
  if (params.index === 0 || store.tableIndex(table) > params.index || waiting === undefined) return;
  const controller = new AbortController();
  waiting.add(controller);
  const jitter = Math.floor(Math.random() * (params.wait / 16));
  const timer = setTimeout(() => controller.abort(), params.wait + jitter);
  const onClose = (): void => controller.abort();
  reply.raw.once('close', onClose);
  gauge?.inc();
  try {
    await store.waitForTableIndex(table, params.index, controller.signal);
  } finally {
    gauge?.dec();
    clearTimeout(timer);
    reply.raw.off('close', onClose);
    waiting.delete(controller);
  }
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Index of the watched table taken just before the read: what X-Service-Index reports. */
    watchIndex?: number;
    /** Consistency mode the read was served with. */
    consistency?: Consistency;
  }
}

/**
 * Everything a read does before touching data: parse the blocking and consistency
 * parameters, wait when asked, and take the index snapshot. The snapshot is taken
 * before reading so a change landing in between makes the next blocking call return
 * at once instead of being missed.
 */
export class ReadGate {
  /** Every blocked read, so shutdown can release them; undefined once shut down. */
  private waiting: Set<AbortController> | undefined = new Set();
  /** Identical reads in progress: one computation and one serialised body for all. */
  private readonly inFlight = new Map<string, Promise<string>>();

  constructor(
    private readonly store: Store,
    private readonly gauge?: BlockingGauge,
    /** Catch-up before a `consistent` read (a secondary reaches the primary's index first). */
    private readonly beforeConsistentRead?: () => Promise<void>,
  ) {}

  async prepare(request: FastifyRequest, reply: FastifyReply, table: WatchTable): Promise<BlockingParams> {
    const params = blockingParams(request);
    request.consistency = params.consistency;
    if (params.consistency === 'consistent' && this.beforeConsistentRead) await this.beforeConsistentRead();
    await waitForChange(this.store, table, params, reply, this.waiting, this.gauge);
    request.watchIndex = this.store.tableIndex(table);
    return params;
  }

  /**
   * Runs a read, sharing it with identical reads already running: same path and query,
   * same caller (token and scope headers), same index snapshot. When one write wakes
   * thousands of blocked watchers of the same list, the answer is computed and
   * serialised once. Nothing is kept after the read settles.
   */
  shared(request: FastifyRequest, compute: () => Promise<unknown>, serialize: (value: unknown) => string): Promise<string> {
    const h = request.headers;
    const key = [
      request.watchIndex ?? '',
      request.url,
      h['x-service-token'] ?? '',
      h['x-consul-token'] ?? '',
      h.authorization ?? '',
      h['x-service-namespace'] ?? '',
      h['x-consul-namespace'] ?? '',
      h['x-service-partition'] ?? '',
      h['x-consul-partition'] ?? '',
    ].join('\u0000');
    let running = this.inFlight.get(key);
    if (!running) {
      running = compute().then(serialize);
      this.inFlight.set(key, running);
      const done = (): void => {
        this.inFlight.delete(key);
      };
      running.then(done, done);
    }
    return running;
  }

  /** A whole read: blocking and consistency handling, then one shared computation, then the JSON. */
  async serve(request: FastifyRequest, reply: FastifyReply, table: WatchTable, compute: () => Promise<unknown>): Promise<FastifyReply> {
    await this.prepare(request, reply, table);
    return sendJSONText(reply, await this.shared(request, compute, (value) => toJSONText(request, value)));
  }

  /** Releases every blocked read at once (shutdown): each answers with current data. */
  shutdown(): void {
    const waiting = this.waiting;
    this.waiting = undefined;
    for (const c of waiting ?? []) c.abort();
  }
}
