import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { RequestContext } from '../service/context.js';
import { JSONStream, JSONText } from '../service/views.js';
import type { Store, WatchTable } from '../store/store.js';
import type { AgentInfo } from '../service/context.js';
import type { Metrics } from '../observability/metrics.js';
import { BODY_LIMIT } from './body.js';
import { ERROR_CODE_HEADER, type Refusal } from './errors.js';
import { answered, contextOf, errorAnswer, refuseIfStale } from './pipeline.js';
import { type ForwarderCheck, hintsOf, secretOf } from './request.js';

/**
 * The hot paths (token reads, the policy filter, decisions) are served before Fastify's
 * routing in their plain form: the exact route, no query parameter beyond the few the route
 * names (no `?pretty`, `?index`, `?stale`, `?consistent`, `?dc`), a GET, or a POST/PUT with a
 * body of known length within the limit; no per-client rate limit set; the server not closing.
 * Anything else takes the Fastify route.
 *
 * A route states its logic once (`RouteLogic` in resource.ts); Fastify's handler and this path
 * both run it, so they answer the same bytes, headers and errors. This module only matches
 * requests and writes answers, measured and logged like every route.
 *
 * What it saves is Fastify's per-request machinery (routing, request and reply objects, hook
 * runners, the send pipeline): most of a cached read's CPU time.
 */
export interface DirectSpec {
  /** Query parameters the route reads (`token`, `ns` and `partition` always). */
  query?: readonly string[];
  /**
   * Whether this server answers the request itself right now; otherwise Fastify's route
   * takes it (a write at a secondary or at a follower, which Fastify forwards).
   */
  when?: () => boolean;
  /**
   * Whether the request may go on (a per-client limit: login_rate), checked before the route's
   * logic runs (here once the body is in; on Fastify's route as its onRequest hook, before the
   * body is read), so it holds whichever door the request came in by; throws a WatchwordError
   * to refuse.
   */
  admit?(ctx: RequestContext): void;
  /** Answers from the request's parts; may throw a WatchwordError (sent as Fastify would). */
  run(input: DirectInput): DirectAnswer | Promise<DirectAnswer>;
}

/** A route's answer: JSON text, a value's JSON view, or a write's value with its index. */
/** A route's answer: JSON text (made whole, or as it is sent), a write's value and index. */
export type DirectAnswer = JSONText | JSONStream | string | Written;

/** A write's answer: the value, sent with the index of its change (X-Service-Index, X-Consul-Index). */
export class Written {
  constructor(
    readonly value: unknown,
    readonly index: number,
  ) {}
}

/** What a route's logic is given, whichever door the request came in by. */
export interface DirectInput<Params = Record<string, string>> {
  ctx: RequestContext;
  /** The path's parameters, decoded. */
  params: Params;
  /** The query parameters the route names, those the request gives. */
  query: ReadonlyMap<string, string>;
  /** The body as text (POST and PUT; '' without one, and for GET and DELETE). */
  body: string;
}

/** A route's direct form as registered: pattern, method, table. */
interface DirectRoute extends DirectSpec {
  method: string;
  /** Route pattern (`/v1/acl/token/:AccessorID`): what metrics and logs name. */
  url: string;
  /** The pattern up to its parameter (for `/:name` routes), else the whole path. */
  prefix: string;
  /** The parameter's name (`/:name` routes), else ''. */
  paramName: string;
  accepted: ReadonlySet<string>;
  table?: WatchTable;
}

const COMMON_PARAMS = ['token', 'ns', 'partition'];
const NO_PARAMS: Record<string, string> = Object.freeze({});
/** Path parameters taken directly: unreserved characters only (anything Fastify would decode goes to it). */
const PARAM = /^[A-Za-z0-9._~-]{1,512}$/;

declare module 'fastify' {
  interface FastifyInstance {
    /** The direct forms of routes (see http/direct.ts), filled as routes are registered. */
    directRoutes: DirectRoutes;
  }
}

const JSON_TYPE = 'application/json; charset=utf-8';
/** How many answer lengths a read's prepared headers are kept for (a token's JSON has a few lengths). */
const PREPARED_LENGTHS = 256;

/** Index headers of a read (X-Service-* and their X-Consul-* aliases), rebuilt only when a value changes. */
export class IndexHeaders {
  private index = -1;
  private knownLeader = false;
  private lastContact = -1;
  private consistency = '';
  private value: Record<string, string> = {};
  /** A direct read's every header, by its body's length, for the values `value` holds. */
  private prepared = new Map<number, readonly string[]>();

  /**
   * All the headers of a direct read's 200 answer of `length` bytes (as `get` with the leader's
   * consistency, then the content type and length), names and values side by side as node's
   * writeHead takes them: made once per index change and length, not per request.
   */
  answer(index: number, knownLeader: boolean, lastContact: number, length: number): readonly string[] {
    const value = this.get(index, knownLeader, lastContact, 'leader');
    let headers = this.prepared.get(length);
    if (headers === undefined) {
      const flat: string[] = [];
      for (const [k, v] of Object.entries(value)) flat.push(k, v);
      flat.push('content-type', JSON_TYPE, 'content-length', String(length));
      if (this.prepared.size >= PREPARED_LENGTHS) this.prepared.clear();
      this.prepared.set(length, (headers = flat));
    }
    return headers;
  }

  get(index: number, knownLeader: boolean, lastContact: number, consistency: string): Record<string, string> {
    if (index !== this.index || knownLeader !== this.knownLeader || lastContact !== this.lastContact || consistency !== this.consistency) {
      const v: Record<string, string> = {};
      for (const prefix of ['x-service-', 'x-consul-']) {
        v[`${prefix}index`] = String(index);
        v[`${prefix}knownleader`] = String(knownLeader);
        v[`${prefix}lastcontact`] = String(lastContact);
        v[`${prefix}effective-consistency`] = consistency;
      }
      this.index = index;
      this.knownLeader = knownLeader;
      this.lastContact = lastContact;
      this.consistency = consistency;
      this.value = v;
      this.prepared = new Map();
    }
    return this.value;
  }
}

export interface DirectDeps {
  store: Pick<Store, 'tableIndex'>;
  agent: Pick<AgentInfo, 'knownLeader' | 'lastContactMs'>;
  metrics: Pick<Metrics, 'observeRequest'>;
  indexHeaders: IndexHeaders;
  /** Per-client rate limits apply to every request: with them set, nothing is served directly. */
  rateLimited: boolean;
  /** Records a refused request in the audit log, as Fastify's routes do (errors.ts). */
  auditRefusal?: (refusal: Refusal) => void;
  /** Whether a forwarded request comes from a server that proves it (whose forwarded requests name their original client). */
  forwarderCheck?: ForwarderCheck;
  /** At the primary, its epoch: a forwarded write from a secondary that has seen a higher one is refused. */
  primaryEpoch?: () => number | undefined;
  staleSeen?: () => void;
}

export class DirectRoutes {
  private readonly exact = new Map<string, DirectRoute>();
  private readonly withParam: DirectRoute[] = [];

  add(method: string, url: string, spec: DirectSpec, table?: WatchTable): void {
    const colon = url.indexOf(':');
    const hasParam = colon >= 0;
    if (hasParam && (url[colon - 1] !== '/' || url.indexOf('/', colon) >= 0 || url.indexOf(':', colon + 1) >= 0)) {
      throw new Error(`direct route ${url}: only a single parameter at the end of the path is supported`);
    }
    const route: DirectRoute = {
      ...spec,
      method,
      url,
      prefix: hasParam ? url.slice(0, colon) : url,
      paramName: hasParam ? url.slice(colon + 1) : '',
      accepted: new Set([...COMMON_PARAMS, ...(spec.query ?? [])]),
      ...(table ? { table } : {}),
    };
    if (hasParam) this.withParam.push(route);
    else this.exact.set(`${method} ${url}`, route);
  }

  /** The direct route of a request, with its parameter and query; undefined sends it to Fastify. */
  match(req: IncomingMessage): { route: DirectRoute; param: string; query: Map<string, string> } | undefined {
    const method = req.method as string;
    if (method !== 'GET' && method !== 'POST' && method !== 'PUT' && method !== 'DELETE') return undefined;
    const url = req.url ?? '';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    let route = this.exact.get(`${method} ${path}`);
    let param = '';
    if (route === undefined) {
      for (const r of this.withParam) {
        if (r.method === method && path.startsWith(r.prefix)) {
          param = path.slice(r.prefix.length);
          if (!PARAM.test(param)) return undefined;
          route = r;
          break;
        }
      }
      if (route === undefined) return undefined;
    }
    if (method === 'DELETE') {
      // A DELETE takes no body: one sent (a length other than 0, or chunks) is Fastify's to refuse.
      const length = req.headers['content-length'];
      if ((length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined) return undefined;
    } else if (method !== 'GET') {
      const length = req.headers['content-length'];
      if (length === undefined || req.headers['transfer-encoding'] !== undefined || !(Number(length) <= BODY_LIMIT)) return undefined;
    }
    const query = new Map<string, string>();
    if (q >= 0 && q < url.length - 1) {
      for (const [key, value] of new URLSearchParams(url.slice(q + 1))) {
        if (!route.accepted.has(key) || query.has(key)) return undefined;
        query.set(key, value);
      }
    }
    return { route, param, query };
  }

  /**
   * Puts the direct routes in front of Fastify's request listener. Call once, after the
   * Fastify instance is made; routes may be added until the first request.
   */
  install(app: FastifyInstance, deps: DirectDeps): void {
    if (deps.rateLimited) return;
    const server = app.server;
    const [viaFastify] = server.listeners('request') as Array<(req: IncomingMessage, res: ServerResponse) => void>;
    if (viaFastify === undefined) return;
    let closing = false;
    app.addHook('preClose', (done) => {
      closing = true;
      done();
    });
    const serving = new DirectServing(deps, app.log as unknown as Logger);
    server.removeListener('request', viaFastify);
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      let found: ReturnType<DirectRoutes['match']>;
      try {
        found = closing ? undefined : this.match(req);
        // `when` may throw (no leader known): Fastify's route then answers with that error.
        if (found?.route.when !== undefined && !found.route.when()) found = undefined;
      } catch {
        found = undefined;
      }
      if (found === undefined) return viaFastify(req, res);
      if (found.route.method === 'GET' || found.route.method === 'DELETE')
        serving.serve(req, res, found.route, found.param, found.query, '');
      else readBody(req, res, (body) => serving.serve(req, res, found.route, found.param, found.query, body));
    });
  }
}

/** Runs a matched request through the request pipeline (http/pipeline.ts) and writes its answer. */
class DirectServing {
  private readonly answers: AnswerBatch;
  /** Request ids of their own series (Fastify numbers the requests it routes). */
  private requests = 0;

  constructor(
    private readonly deps: DirectDeps,
    private readonly log: Logger,
  ) {
    this.answers = new AnswerBatch(
      (status, route, started) => this.logged(status, route, started),
      (err) => log.error({ err }, 'writing an answer failed'),
    );
  }

  serve(req: IncomingMessage, res: ServerResponse, route: DirectRoute, param: string, query: Map<string, string>, body: string): void {
    const started = performance.now();
    // A read reports the index of its table as it was just before reading.
    const index = route.table === undefined ? undefined : this.deps.store.tableIndex(route.table);
    let ctx: RequestContext | undefined;
    try {
      this.requests = (this.requests + 1) | 0;
      ctx = contextOf(
        {
          id: `direct-${(this.requests >>> 0).toString(36)}`,
          method: route.method,
          url: req.url ?? '',
          ip: req.socket.remoteAddress ?? '',
          raw: req,
          secret: secretOf(query.get('token'), req.headers),
          hints: hintsOf(query.get('ns'), query.get('partition'), req.headers),
          route: route.url,
        },
        this.deps.forwarderCheck,
      );
      refuseIfStale(route.method, req.headers, this.deps.primaryEpoch, this.deps.staleSeen);
      route.admit?.(ctx);
      const params = route.paramName === '' ? NO_PARAMS : { [route.paramName]: param };
      const answer = route.run({ ctx, params, query, body });
      const send = (a: DirectAnswer) => {
        if (a instanceof Written) this.finish(res, route, started, 200, JSON.stringify(a.value), index, undefined, a.index);
        else if (a instanceof JSONText) this.finish(res, route, started, 200, a.bytes, index, undefined, undefined, undefined, a.headers);
        else if (a instanceof JSONStream) this.stream(res, route, started, a, index);
        else this.finish(res, route, started, 200, a, index);
      };
      const c = ctx;
      if (answer instanceof Promise) answer.then(send, (err: unknown) => this.fail(req, res, route, c, started, index, err));
      else send(answer);
    } catch (err) {
      this.fail(req, res, route, ctx, started, index, err);
    }
  }

  private finish(
    res: ServerResponse,
    route: DirectRoute,
    started: number,
    status: number,
    body: string | Buffer,
    index: number | undefined,
    retryAfter?: number,
    written?: number,
    error?: { code: string; contentType: string },
    /** Headers the answer carries besides the usual ones (a paged list's next cursor). */
    extra?: Readonly<Record<string, string>>,
  ): void {
    const deps = this.deps;
    if (status === 200 && index !== undefined && written === undefined && extra === undefined) {
      // A read's answer: its headers prepared for this index and length.
      const length = typeof body === 'string' ? Buffer.byteLength(body) : body.length;
      const prepared = deps.indexHeaders.answer(Math.max(1, index), deps.agent.knownLeader(), deps.agent.lastContactMs(), length);
      this.answers.add(res, status, prepared, body, route, started);
      return;
    }
    const headers: Record<string, string | number> =
      index === undefined
        ? {}
        : { ...deps.indexHeaders.get(Math.max(1, index), deps.agent.knownLeader(), deps.agent.lastContactMs(), 'leader') };
    if (written !== undefined) {
      headers['x-service-index'] = written;
      headers['x-consul-index'] = written;
    }
    headers['content-type'] = error?.contentType ?? JSON_TYPE;
    if (error !== undefined) headers[ERROR_CODE_HEADER] = error.code;
    headers['content-length'] = typeof body === 'string' ? Buffer.byteLength(body) : body.length;
    if (retryAfter !== undefined) headers['retry-after'] = String(retryAfter);
    if (extra !== undefined) Object.assign(headers, extra);
    this.answers.add(res, status, headers, body, route, started);
  }

  /** An answer sent as it is made (a JSONStream): chunked, each chunk written once the client took the last. */
  private stream(res: ServerResponse, route: DirectRoute, started: number, answer: JSONStream, index: number | undefined): void {
    const deps = this.deps;
    const headers: Record<string, string | number> =
      index === undefined
        ? {}
        : { ...deps.indexHeaders.get(Math.max(1, index), deps.agent.knownLeader(), deps.agent.lastContactMs(), 'leader') };
    headers['content-type'] = JSON_TYPE;
    res.writeHead(200, headers);
    const chunks = answer.chunks();
    const pump = (): void => {
      try {
        for (;;) {
          if (res.destroyed) return;
          const next = chunks.next();
          if (next.done) {
            res.end();
            this.logged(200, route, started);
            return;
          }
          if (!res.write(next.value)) return void res.once('drain', pump);
        }
      } catch (err) {
        // Headers are gone already: the answer can only be cut short.
        this.log.error({ err }, 'a streamed answer failed');
        res.destroy();
      }
    };
    pump();
  }

  private logged(status: number, route: DirectRoute, started: number): void {
    answered(this.deps.metrics, this.log, route.method, route.url, status, performance.now() - started, this.requestID);
  }

  /** The id the debug line of the latest request gives (made only when debug is on). */
  private readonly requestID = (): string => `direct-${(this.requests >>> 0).toString(36)}`;

  private fail(
    req: IncomingMessage,
    res: ServerResponse,
    route: DirectRoute,
    ctx: RequestContext | undefined,
    started: number,
    index: number | undefined,
    err: unknown,
  ): void {
    const a = errorAnswer(
      err,
      {
        id: ctx?.request?.id ?? '',
        method: route.method,
        url: req.url ?? '',
        route: route.url,
        secret: ctx?.secret,
        remote: () => ctx?.request?.remote ?? '',
        via: () => ctx?.request?.via,
        accept: req.headers.accept,
      },
      { log: this.log, auditRefusal: this.deps.auditRefusal },
    );
    this.finish(res, route, started, a.status, a.body, index, a.retryAfter, undefined, { code: a.code, contentType: a.contentType });
  }
}

/** An answer's headers: by name, or prepared as names and values side by side. */
type AnswerHeaders = Record<string, string | number> | readonly string[];

/**
 * Answers held until the event loop has run every request it read this turn, then written in
 * one burst. Each write to a client that is waiting in its poll wakes it, and on loopback the
 * writer pays for that wake-up (`sock_def_readable`, an inter-processor interrupt): answered
 * one at a time between requests' work, a client that keeps up goes back to sleep before each
 * answer; answered together, it is woken once. With 32 connections reading tokens this halved
 * the server's CPU per read (77 to 42 µs; `perf` put the difference in that wake-up). A
 * request alone in its turn waits for nothing but the turn's end.
 */
class AnswerBatch {
  private readonly pending: Array<{
    res: ServerResponse;
    status: number;
    headers: AnswerHeaders;
    body: string | Buffer;
    route: DirectRoute;
    started: number;
  }> = [];

  constructor(
    private readonly written: (status: number, route: DirectRoute, started: number) => void,
    private readonly failed: (err: unknown) => void,
  ) {}

  add(res: ServerResponse, status: number, headers: AnswerHeaders, body: string | Buffer, route: DirectRoute, started: number): void {
    if (this.pending.push({ res, status, headers, body, route, started }) === 1) setImmediate(this.flush);
  }

  private readonly flush = (): void => {
    const pending = this.pending;
    // Answers added while these are written (none today: writing runs no route) wait for the next turn.
    const n = pending.length;
    for (let i = 0; i < n; i++) {
      const a = pending[i] as (typeof pending)[number];
      try {
        // A client gone meanwhile: its socket is destroyed and nothing is written.
        if (!a.res.destroyed) {
          a.res.writeHead(a.status, a.headers as OutgoingHttpHeaders | string[]);
          a.res.end(a.body);
        }
        this.written(a.status, a.route, a.started);
      } catch (err) {
        this.failed(err);
      }
    }
    pending.splice(0, n);
    if (pending.length > 0) setImmediate(this.flush);
  };
}

/** Reads a body of known length (checked by `match`) in full. */
function readBody(req: IncomingMessage, res: ServerResponse, then: (body: string) => void): void {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('error', () => res.destroy());
  req.on('end', () => then(chunks.length === 1 ? (chunks[0] as Buffer).toString('utf8') : Buffer.concat(chunks).toString('utf8')));
}
