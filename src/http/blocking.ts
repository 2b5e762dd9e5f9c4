import type { FastifyReply, FastifyRequest } from 'fastify';
import { invalid } from '../domain/errors.js';
import { parseDuration } from '../domain/duration.js';
import type { Store, WatchTable } from '../store/store.js';
import { queryFlag, queryParam } from './request.js';

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
  stopping: AbortSignal,
  gauge?: BlockingGauge,
): Promise<void> {
  if (params.index === 0 || store.tableIndex(table) > params.index || stopping.aborted) return;
  const controller = new AbortController();
  const onStop = (): void => controller.abort();
  stopping.addEventListener('abort', onStop, { once: true });
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
    stopping.removeEventListener('abort', onStop);
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
  private readonly stopping = new AbortController();

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
    await waitForChange(this.store, table, params, reply, this.stopping.signal, this.gauge);
    request.watchIndex = this.store.tableIndex(table);
    return params;
  }

  /** Releases every blocked read at once (shutdown): each answers with current data. */
  shutdown(): void {
    this.stopping.abort();
  }
}
