import type { FastifyReply, FastifyRequest } from 'fastify';
import { WatchwordError, invalid } from '../domain/errors.js';
import { parseDuration } from '../domain/duration.js';
import type { Store, WatchTable } from '../store/store.js';
import type { AclResolver } from '../service/acl-resolver.js';
import type { BlockingGauge } from '../observability/metrics.js';
import { authorize, authorizeList } from '../service/permissions.js';
import { queryFlag, queryParam, secretOf } from './request.js';
import { requestContext } from './pipeline.js';
import { sendJSONStream, sendJSONText, toJSONText } from './respond.js';
import { JSONStream, JSONText } from '../service/views.js';

/** A read's answer as sent: its JSON, and headers besides the index ones (a paged list's next cursor). */
interface Rendered {
  text: string;
  headers: Readonly<Record<string, string>> | undefined;
  /** An answer sent as it is made; each reader walks it afresh. */
  stream?: JSONStream;
}

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

declare module 'fastify' {
  interface FastifyRequest {
    /** Index of the watched table taken just before the read: what X-Service-Index reports. */
    watchIndex?: number;
    /** Consistency mode the read was served with. */
    consistency?: Consistency;
  }
}

/** What a read needs of its caller before it may wait: checked before any blocking. */
export type ReadAccess = 'self' | 'read' | 'list';

export interface ReadGateOptions {
  gauge?: BlockingGauge;
  /** Catch-up before a `consistent` read (a secondary reaches the primary's index first). */
  beforeConsistentRead?: () => Promise<void>;
  /**
   * Resolves the request's token and checks it may make this read (throws when not), so
   * that nobody holds a blocking slot or a trip to the primary on a bad token.
   */
  authorize?: (request: FastifyRequest, access: ReadAccess) => Promise<void>;
  /** Blocking queries held at once, in all (0: no cap). */
  maxBlocking?: number;
  /** Blocking queries held at once per client address (0: no cap). */
  maxBlockingPerClient?: number;
}

/** The check before a read may wait: the token resolves, and holds acl:read where the read looks. */
export function readAuthorizer(resolver: AclResolver): NonNullable<ReadGateOptions['authorize']> {
  return async (request, access) => {
    const ctx = requestContext(request);
    if (access === 'self') await resolver.resolve(ctx.secret, ctx.client);
    else if (access === 'list') await authorizeList(resolver, ctx);
    else await authorize(resolver, ctx, 'read');
  };
}

/**
 * Everything a read does before touching data: parse the blocking and consistency
 * parameters, check the caller, wait when asked, and take the index snapshot. The
 * snapshot is taken before reading so a change landing in between makes the next
 * blocking call return at once instead of being missed.
 */
export class ReadGate {
  /** Every blocked read, so shutdown can release them; undefined once shut down. */
  private waiting: Set<AbortController> | undefined = new Set();
  /** Blocked reads per client address. */
  private readonly perClient = new Map<string, number>();
  /** Identical reads in progress: one computation and one serialised body for all. */
  private readonly inFlight = new Map<string, Promise<Rendered>>();

  constructor(
    private readonly store: Store,
    private readonly options: ReadGateOptions = {},
  ) {}

  /** Blocked reads right now (all clients). */
  blocked(): number {
    return this.waiting?.size ?? 0;
  }

  async prepare(request: FastifyRequest, reply: FastifyReply, table: WatchTable, access: ReadAccess): Promise<BlockingParams> {
    const params = blockingParams(request);
    request.consistency = params.consistency;
    const blocking = params.index > 0 && this.store.tableIndex(table) <= params.index;
    if ((blocking || params.consistency === 'consistent') && this.options.authorize) await this.options.authorize(request, access);
    if (params.consistency === 'consistent' && this.options.beforeConsistentRead) await this.options.beforeConsistentRead();
    await this.waitForChange(request, reply, table, params);
    request.watchIndex = this.store.tableIndex(table);
    return params;
  }

  /**
   * Waits, when asked to, until `table` changes past `params.index`, the wait (plus up
   * to wait/16 of jitter) runs out, or the client goes away. Costs one timer and one
   * waiter entry per request; nothing polls. Past the caps the read is refused (429).
   */
  private async waitForChange(request: FastifyRequest, reply: FastifyReply, table: WatchTable, params: BlockingParams): Promise<void> {
    if (params.index === 0 || this.store.tableIndex(table) > params.index) return;
    await this.hold(request, reply, params.wait, (signal) => this.store.waitForTableIndex(table, params.index, signal));
  }

  /**
   * Holds a request until `until` settles, the wait (plus up to wait/16 of jitter) runs out,
   * the client goes away, or the daemon shuts down; `until` gets the signal of all those.
   * Within the caps on blocked reads (429 past them).
   */
  async hold(request: FastifyRequest, reply: FastifyReply, waitMs: number, until: (signal: AbortSignal) => Promise<void>): Promise<void> {
    const waiting = this.waiting;
    if (waiting === undefined) return;
    const client = request.ip;
    const mine = this.perClient.get(client) ?? 0;
    const { maxBlocking = 0, maxBlockingPerClient = 0 } = this.options;
    if (maxBlockingPerClient > 0 && mine >= maxBlockingPerClient) {
      throw new WatchwordError(
        'RATE_LIMITED',
        `Too many blocking queries from ${client}: at most ${maxBlockingPerClient} may wait at once; retry later or without ?index`,
        { retryAfter: 5 },
      );
    }
    if (maxBlocking > 0 && waiting.size >= maxBlocking) {
      throw new WatchwordError(
        'RATE_LIMITED',
        `Too many blocking queries: at most ${maxBlocking} may wait at once; retry later or without ?index`,
        { retryAfter: 5 },
      );
    }
    const controller = new AbortController();
    waiting.add(controller);
    this.perClient.set(client, mine + 1);
    const jitter = Math.floor(Math.random() * (waitMs / 16));
    const timer = setTimeout(() => controller.abort(), waitMs + jitter);
    const onClose = (): void => controller.abort();
    reply.raw.once('close', onClose);
    this.options.gauge?.inc();
    try {
      await until(controller.signal);
    } finally {
      this.options.gauge?.dec();
      clearTimeout(timer);
      reply.raw.off('close', onClose);
      waiting.delete(controller);
      const left = (this.perClient.get(client) ?? 1) - 1;
      if (left <= 0) this.perClient.delete(client);
      else this.perClient.set(client, left);
    }
  }

  /**
   * Runs a read, sharing it with identical reads already running: same path and query,
   * same caller (token and scope headers), same index snapshot. When one write wakes
   * thousands of blocked watchers of the same list, the answer is computed and
   * serialised once. Nothing is kept after the read settles.
   */
  shared(request: FastifyRequest, compute: () => Promise<unknown>, serialize: (value: unknown) => Rendered): Promise<Rendered> {
    const h = request.headers;
    const key = [
      request.watchIndex ?? '',
      request.url,
      secretOf(undefined, h) ?? '',
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

  /**
   * A whole read: blocking and consistency handling, then the computation, then the JSON.
   * Reads that woke from a wait share one computation with identical ones (a write can
   * wake thousands of watchers of the same list); a plain read just runs.
   */
  async serve(
    request: FastifyRequest,
    reply: FastifyReply,
    table: WatchTable,
    access: ReadAccess,
    compute: () => Promise<unknown> | unknown,
  ): Promise<FastifyReply> {
    const params = await this.prepare(request, reply, table, access);
    // The JSON, and the headers an answer carries besides the index ones (a paged list's next cursor).
    const render = (value: unknown): Rendered =>
      value instanceof JSONStream && !queryFlag(request, 'pretty')
        ? { text: '', headers: undefined, stream: value }
        : { text: toJSONText(request, value), headers: value instanceof JSONText ? value.headers : undefined };
    const answer = params.index === 0 ? render(await compute()) : await this.shared(request, async () => compute(), render);
    if (answer.headers) void reply.headers(answer.headers);
    if (answer.stream) return sendJSONStream(request, reply, answer.stream);
    return sendJSONText(request, reply, answer.text);
  }

  /** Releases every blocked read at once (shutdown): each answers with current data. */
  shutdown(): void {
    const waiting = this.waiting;
    this.waiting = undefined;
    for (const c of waiting ?? []) c.abort();
  }
}
