import type { TokenAuthorizerResponse } from '../api/schemas.js';
import type { CommitEvent } from '../store/store.js';
import { type ClientReport, ReportIntake, type ReportFrame, parseReport } from './watch-reports.js';

export type { ClientReport, ReportedCheck } from './watch-reports.js';

/**
 * Enforcing clients' watches of sets of tokens (README, "Enforcing policies in your service";
 * SPEC §20): one connection per client carries every token it caches, whatever their number,
 * instead of a blocking query each. A client names each token by a number of its own, its
 * secret and the content hash it holds; the server answers what changed (a new view and hash,
 * or gone) as soon as a commit changes it, and a beat every few seconds that says "everything
 * you hold is current as of now". Nothing polls: a commit costs a look-up per token it wrote,
 * and a policy or role change re-judges only the watched tokens that depend on it.
 *
 * The wire (JSON text frames; `src/client/token-watch.ts` speaks the other side):
 * - client: `{"t":"watch","seq":N,"add":[[id,secret,hash],...]}`, `{"t":"unwatch","ids":[...]}`,
 *   `{"t":"used","ids":[...]}` (tokens the client judged since its last report: their last use),
 *   `{"t":"report","client":NAME,"denied":[[id,resource,segment,access,partition,namespace,count],...],
 *   "allowed":[[id,resource,segment,access,partition,namespace],...],"unknown":N,"dropped":N}` (its decisions, at
 *   most once a second: client/decision-reports.ts);
 * - server: `{"t":"changes","ack":N,"set":[[id,hash,view],...],"gone":[id,...]}` and
 *   `{"t":"beat","ack":N}`, where `ack` is the last watch frame applied.
 */

/** Tokens one connection may watch at once. */
export const MAX_WATCHED = 100_000;
/** Tokens the connections from one address may watch at once, in all (~300 MB of the server's memory). */
export const MAX_WATCHED_PER_ADDRESS = 1_000_000;
/** Tokens one watch frame may add. */
export const MAX_ADD = 5_000;
/** Beats at most this often and at least this rarely (ms). */
export const BEAT_RANGE = { min: 50, max: 30_000 } as const;
/** Uses clients report are recorded this often, together. */
const USE_EVERY_MS = 5_000;
/** Watched tokens judged again per turn of the event loop after a wide change (a policy many depend on, a restore). */
const JUDGE_CHUNK = 2_000;
/** A client that reads nothing while this much waits to be sent is cut off. */
const MAX_BUFFERED = 64 * 1024 * 1024;

/** What the watches need of the server. */
export interface WatchDeps {
  onCommit(listener: (event: CommitEvent) => void): () => void;
  /** The token's view as a client compiles it, from this server's state alone; throws when it cannot be given (gone, stale). */
  view(secret: string): { view: TokenAuthorizerResponse; hash: string; accessor: string; dependsOn: string[] };
  /** A watched token's use (last use, SPEC §20). */
  recordUse(accessor: string, ms: number): void;
  /** Whether global tokens cannot be confirmed now (a secondary cut off from its primary too long). */
  stale(): boolean;
  /** A client's report of its decisions, its tokens named by AccessorID (SPEC §22). */
  report?(r: ClientReport): void;
  now(): number;
}

/** One connection, as the transport carrying it offers it. */
export interface WatchSocket {
  send(text: string): void;
  /** Bytes queued and not yet sent. */
  buffered(): number;
  close(code: number, reason: string): void;
}

interface Item {
  readonly conn: WatchConnection;
  readonly id: number;
  readonly secret: string;
  readonly accessor: string;
  hash: string;
}

/** One watched token: every item naming it, and the policies and roles it depends on. */
interface Watched {
  readonly items: Set<Item>;
  dependsOn: readonly string[];
  /** The secret its first item named (the one string the others share when they name the same). */
  readonly secret: string;
}

/** A watch frame as parsed, or why it cannot be. */
type Frame =
  | { t: 'watch'; seq: number; add: Array<[number, string, string]> }
  | { t: 'unwatch'; ids: number[] }
  | { t: 'used'; ids: number[] }
  | ReportFrame;

const isId = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

function parseFrame(text: string): Frame | string {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return 'a frame that is not JSON';
  }
  if (raw === null || typeof raw !== 'object') return 'a frame that is not an object';
  const f = raw as Record<string, unknown>;
  if (f.t === 'watch') {
    if (!isId(f.seq)) return 'watch: seq must be a whole number';
    if (!Array.isArray(f.add) || f.add.length > MAX_ADD) return `watch: add must be an array of at most ${MAX_ADD} entries`;
    for (const e of f.add) {
      if (
        !Array.isArray(e) ||
        e.length !== 3 ||
        !isId(e[0]) ||
        typeof e[1] !== 'string' ||
        e[1].length > 256 ||
        typeof e[2] !== 'string' ||
        e[2].length > 64
      )
        return 'watch: each entry is [id, secret, hash]: a whole number, a secret of at most 256 characters, a hash of at most 64';
    }
    return f as Frame;
  }
  if (f.t === 'report') return parseReport(f, isId);
  if (f.t === 'unwatch' || f.t === 'used') {
    if (!Array.isArray(f.ids) || f.ids.length > MAX_WATCHED || !f.ids.every(isId)) return `${f.t}: ids must be an array of whole numbers`;
    return f as Frame;
  }
  return `unknown frame type ${JSON.stringify(String(f.t)).slice(0, 40)}`;
}

/** One client's watch: the tokens it holds by its numbers, and what waits to be sent to it. */
export class WatchConnection {
  readonly items = new Map<number, Item>();
  /** The last watch frame applied. */
  ack = 0;
  private set: Array<[number, string, TokenAuthorizerResponse]> = [];
  private gone: number[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly hub: AuthorizerWatches,
    readonly socket: WatchSocket,
    beatMs: number,
    /** The client's address (the cap of MAX_WATCHED_PER_ADDRESS). */
    readonly address: string,
  ) {
    this.timer = setInterval(() => hub.beat(this), beatMs);
    this.timer.unref();
  }

  /** A frame from the client; a frame that cannot be understood ends the connection with the reason. */
  receive(text: string): void {
    if (this.timer === undefined) return;
    const frame = parseFrame(text);
    if (typeof frame === 'string') return this.end(1008, frame);
    if (frame.t === 'watch') {
      if (this.items.size + frame.add.length > MAX_WATCHED) return this.end(1008, `a watch holds at most ${MAX_WATCHED} tokens`);
      if (!this.hub.admits(this.address, frame.add.length))
        return this.end(1008, `the watches from one address hold at most ${MAX_WATCHED_PER_ADDRESS} tokens`);
      for (const [id, secret, hash] of frame.add) this.hub.add(this, id, secret, hash);
      this.ack = Math.max(this.ack, frame.seq);
      this.flush(true);
    } else if (frame.t === 'unwatch') {
      for (const id of frame.ids) this.hub.remove(this, id);
    } else if (frame.t === 'report') {
      this.report(frame);
    } else {
      this.hub.used(this, frame.ids);
    }
  }

  /** Its reports of decisions, taken at most twice a second (watch-reports.ts). */
  private readonly reports = new ReportIntake();

  private report(frame: ReportFrame): void {
    const r = this.reports.take(frame, (id) => this.items.get(id)?.accessor, this.address);
    if (r !== undefined) this.hub.report(r);
  }

  /** The connection ended (either side): its tokens are no longer watched. */
  closed(): void {
    if (this.timer === undefined) return;
    clearInterval(this.timer);
    this.timer = undefined;
    for (const id of [...this.items.keys()]) this.hub.remove(this, id);
    this.hub.forget(this);
  }

  changed(item: Item, hash: string, view: TokenAuthorizerResponse): void {
    item.hash = hash;
    this.set.push([item.id, hash, view]);
  }

  lost(item: Item): void {
    this.gone.push(item.id);
  }

  /** Sends what changed (and, with `always`, an acknowledgement even when nothing did). */
  flush(always = false): void {
    if (this.timer === undefined) return;
    if (!always && this.set.length === 0 && this.gone.length === 0) return;
    this.send({ t: 'changes', ack: this.ack, set: this.set, gone: this.gone });
    this.set = [];
    this.gone = [];
  }

  beat(): void {
    this.send({ t: 'beat', ack: this.ack });
  }

  private send(frame: object): void {
    if (this.socket.buffered() > MAX_BUFFERED) return this.end(1008, 'the client reads too slowly');
    this.socket.send(JSON.stringify(frame));
  }

  private end(code: number, reason: string): void {
    this.socket.close(code, reason);
    this.closed();
  }
}

/** Every watch on this server, with the indexes a commit is matched against. */
export class AuthorizerWatches {
  private readonly connections = new Set<WatchConnection>();
  /** Tokens watched by the connections from each address. */
  private readonly perAddress = new Map<string, number>();
  /** Watched tokens by AccessorID. */
  private readonly byAccessor = new Map<string, Watched>();
  /** Watched AccessorIDs by the policies and roles they depend on. */
  private readonly byDependency = new Map<string, Set<string>>();
  /** AccessorIDs to judge again (a wide change is judged a chunk at a time). */
  private readonly pending = new Set<string>();
  private draining = false;
  /** Tokens clients reported as used since they were last recorded. */
  private readonly usedSince = new Set<string>();
  private useTimer: NodeJS.Timeout | undefined;
  private wasStale = false;
  private readonly unsubscribe: () => void;

  constructor(private readonly deps: WatchDeps) {
    this.unsubscribe = deps.onCommit((event) => this.committed(event));
  }

  /** A client's report, passed on (SPEC §22). */
  report(r: ClientReport): void {
    this.deps.report?.(r);
  }

  /** A new connection from `address`; `beatMs` as the client asked, within BEAT_RANGE. */
  open(socket: WatchSocket, beatMs: number, address: string): WatchConnection {
    const beat = Math.min(BEAT_RANGE.max, Math.max(BEAT_RANGE.min, Number.isFinite(beatMs) ? beatMs : 10_000));
    const conn = new WatchConnection(this, socket, beat, address);
    this.connections.add(conn);
    return conn;
  }

  /** Whether `address` may watch `more` tokens besides those it watches now. */
  admits(address: string, more: number): boolean {
    return (this.perAddress.get(address) ?? 0) + more <= MAX_WATCHED_PER_ADDRESS;
  }

  /** Connections and tokens watched now (metrics). */
  get size(): { connections: number; tokens: number } {
    let tokens = 0;
    for (const c of this.connections) tokens += c.items.size;
    return { connections: this.connections.size, tokens };
  }

  close(): void {
    this.unsubscribe();
    clearTimeout(this.useTimer);
    this.recordUses();
    for (const c of [...this.connections]) {
      c.socket.close(1001, 'the server is shutting down');
      c.closed();
    }
  }

  forget(conn: WatchConnection): void {
    this.connections.delete(conn);
  }

  add(conn: WatchConnection, id: number, secret: string, hash: string): void {
    this.remove(conn, id);
    let answer: ReturnType<WatchDeps['view']>;
    try {
      answer = this.deps.view(secret);
    } catch {
      conn.lost({ conn, id, secret, accessor: '', hash });
      return;
    }
    // A token watched by a hundred clients holds one copy of its secret and hash, not a hundred.
    const shared = this.byAccessor.get(answer.accessor)?.secret;
    const item: Item = {
      conn,
      id,
      secret: shared === secret ? shared : secret,
      accessor: answer.accessor,
      hash: hash === answer.hash ? answer.hash : hash,
    };
    conn.items.set(id, item);
    this.perAddress.set(conn.address, (this.perAddress.get(conn.address) ?? 0) + 1);
    this.index(item, answer.dependsOn);
    if (answer.hash !== hash) conn.changed(item, answer.hash, answer.view);
  }

  remove(conn: WatchConnection, id: number): void {
    const item = conn.items.get(id);
    if (item === undefined) return;
    conn.items.delete(id);
    const left = (this.perAddress.get(conn.address) ?? 1) - 1;
    if (left > 0) this.perAddress.set(conn.address, left);
    else this.perAddress.delete(conn.address);
    this.unindex(item);
  }

  /**
   * Tokens a client judged: recorded as used once every USE_EVERY_MS for all clients together
   * (a token a hundred clients use is one use, not a hundred: last use is kept to the minute).
   */
  used(conn: WatchConnection, ids: readonly number[]): void {
    for (const id of ids) {
      const item = conn.items.get(id);
      if (item !== undefined) this.usedSince.add(item.accessor);
    }
    if (this.usedSince.size > 0 && this.useTimer === undefined) {
      this.useTimer = setTimeout(() => this.recordUses(), USE_EVERY_MS);
      this.useTimer.unref();
    }
  }

  private recordUses(): void {
    this.useTimer = undefined;
    const now = this.deps.now();
    for (const accessor of this.usedSince) this.deps.recordUse(accessor, now);
    this.usedSince.clear();
  }

  /** A connection's beat: held back while a wide change is being judged, or while global tokens cannot be confirmed. */
  beat(conn: WatchConnection): void {
    const stale = this.deps.stale();
    if (stale !== this.wasStale) {
      this.wasStale = stale;
      // Global tokens cannot be confirmed any more (or can again): every watched token is judged again.
      this.judgeAll();
    }
    if (this.pending.size > 0 || stale) return;
    conn.beat();
  }

  private index(item: Item, dependsOn: readonly string[]): void {
    const watched = this.byAccessor.get(item.accessor);
    if (watched === undefined) {
      this.byAccessor.set(item.accessor, { items: new Set([item]), dependsOn, secret: item.secret });
      for (const d of dependsOn) this.depend(d, item.accessor);
    } else {
      watched.items.add(item);
      this.dependOn(item.accessor, watched, dependsOn);
    }
  }

  private unindex(item: Item): void {
    const watched = this.byAccessor.get(item.accessor);
    if (watched === undefined || !watched.items.delete(item) || watched.items.size > 0) return;
    this.byAccessor.delete(item.accessor);
    for (const d of watched.dependsOn) this.undepend(d, item.accessor);
  }

  /** A token's dependencies as judged now (a role given another policy moves them). */
  private dependOn(accessor: string, watched: Watched, now: readonly string[]): void {
    const before = watched.dependsOn;
    if (before.length === now.length && before.every((d, i) => d === now[i])) return;
    for (const d of before) this.undepend(d, accessor);
    watched.dependsOn = now;
    for (const d of now) this.depend(d, accessor);
  }

  private depend(dependency: string, accessor: string): void {
    let set = this.byDependency.get(dependency);
    if (set === undefined) this.byDependency.set(dependency, (set = new Set()));
    set.add(accessor);
  }

  private undepend(dependency: string, accessor: string): void {
    const set = this.byDependency.get(dependency);
    if (set?.delete(accessor) && set.size === 0) this.byDependency.delete(dependency);
  }

  private committed(event: CommitEvent): void {
    if (this.byAccessor.size === 0) return;
    const changed = event.changed;
    if (changed === undefined) return this.judgeAll();
    for (const a of changed.tokens) if (this.byAccessor.has(a)) this.pending.add(a);
    for (const id of [...changed.policies, ...changed.roles]) for (const a of this.byDependency.get(id) ?? []) this.pending.add(a);
    this.drain();
  }

  private judgeAll(): void {
    for (const a of this.byAccessor.keys()) this.pending.add(a);
    this.drain();
  }

  /** Judges pending tokens a chunk at a time, sending what changed after each chunk. */
  private drain(): void {
    if (this.draining || this.pending.size === 0) return;
    const touched = new Set<WatchConnection>();
    let n = 0;
    for (const accessor of this.pending) {
      this.pending.delete(accessor);
      this.judge(accessor, touched);
      if (++n >= JUDGE_CHUNK) break;
    }
    for (const c of touched) c.flush();
    if (this.pending.size === 0) return;
    this.draining = true;
    setImmediate(() => {
      this.draining = false;
      this.drain();
    });
  }

  /** Every item of one token judged again: the view sent where its hash moved; gone items dropped. */
  private judge(accessor: string, touched: Set<WatchConnection>): void {
    const watched = this.byAccessor.get(accessor);
    if (watched === undefined) return;
    // Items of one token share a secret (each is judged by its own, should they ever differ).
    const answers = new Map<string, ReturnType<WatchDeps['view']> | undefined>();
    for (const item of [...watched.items]) {
      if (!answers.has(item.secret)) answers.set(item.secret, this.viewOrNothing(item.secret));
      const answer = answers.get(item.secret);
      if (answer === undefined || answer.accessor !== accessor) {
        this.remove(item.conn, item.id);
        item.conn.lost(item);
      } else if (answer.hash !== item.hash) {
        item.conn.changed(item, answer.hash, answer.view);
      } else {
        continue;
      }
      touched.add(item.conn);
    }
    const answer = [...answers.values()].find((a) => a?.accessor === accessor);
    if (answer !== undefined && this.byAccessor.get(accessor) === watched) this.dependOn(accessor, watched, answer.dependsOn);
  }

  private viewOrNothing(secret: string): ReturnType<WatchDeps['view']> | undefined {
    try {
      return this.deps.view(secret);
    } catch {
      return undefined;
    }
  }
}
