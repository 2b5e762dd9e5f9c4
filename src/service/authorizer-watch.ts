import type { TokenAuthorizerResponse } from '../api/schemas.js';
import type { CommitEvent } from '../store/store.js';
import { WakeHeap } from './wake-heap.js';
import { type Item, WatchConnection, type WatchHub } from './watch-connection.js';
import { lookUpEntry } from './watch-lookups.js';
import type { ClientReport } from './watch-reports.js';
import {
  BEAT_RANGE,
  DEFAULT_WATCH_LIMITS,
  type WatchCredential,
  type WatchDeps,
  type LookUpOutcome,
  type WatchLimits,
  type WatchSocket,
  type WatchedAnswer,
} from './watch-types.js';

export type { ClientReport, ReportedCheck } from './watch-reports.js';
export { WatchConnection } from './watch-connection.js';
export * from './watch-types.js';

/**
 * Enforcing clients' watches of sets of tokens (docs/enforcing-client.md, "Enforcing policies in your service"):
 * one connection per client carries every token it caches, whatever their number, instead of a
 * blocking query each. The frames are declared in `api/watch-frames.ts`. A watch is opened with
 * a token of the client's own that holds `acl:read` (http/authorizer-watch-socket.ts checks it);
 * each watched token is named by a number of the client's, its secret and the content hash it
 * holds; the server answers what changed (a new view and hash, or gone) as soon as a commit
 * changes it or the moment it stops authenticating (its expiry, the end of a rotation's overlap),
 * and a beat every few seconds that says "everything you hold is current as of now".
 *
 * Nothing is buffered without bound: what a client is owed is a set of its items (each at most
 * once), turned into frames only while less than `connectionBytes` waits to be sent to it; past
 * that the connection is not read until it drains. Every watch together holds at most
 * `totalBytes` queued and `totalTokens` items: past either, the largest consumers are closed first.
 */

/** Uses clients report are recorded this often, together. */
const USE_EVERY_MS = 5_000;
/** Watched tokens judged again per turn of the event loop after a wide change (a policy many depend on, a restore). */
const JUDGE_CHUNK = 2_000;
/** How often a connection that is not being read is looked at again (ms). */
const DRAIN_POLL_MS = 20;

/** One watched token: every item naming it, and the policies and roles it depends on. */
interface Watched {
  readonly items: Set<Item>;
  dependsOn: readonly string[];
  /** The secret its first item named (the one string the others share when they name the same). */
  readonly secret: string;
  /** The earliest moment scheduled to judge it again (an expiry, the end of a rotation's overlap). */
  wakeAt: number;
}

/** The longest a wake-up timer is set for (a longer one is set again when it fires). */
const MAX_TIMER_MS = 3_600_000;

/** Every watch on this server, with the indexes a commit is matched against. */
export class AuthorizerWatches implements WatchHub {
  private readonly connections = new Set<WatchConnection>();
  /** Tokens watched in all, and by the connections of each address and of each credential. */
  private tokens = 0;
  private readonly perAddress = new Map<string, number>();
  private readonly perCredential = new Map<string, number>();
  /** Watched tokens by AccessorID. */
  private readonly byAccessor = new Map<string, Watched>();
  /** Watched AccessorIDs by the policies and roles they depend on. */
  private readonly byDependency = new Map<string, Set<string>>();
  /** Connections by the AccessorID of the token they were opened with. */
  private readonly byCredential = new Map<string, Set<WatchConnection>>();
  /** AccessorIDs to judge again (a wide change is judged a chunk at a time). */
  private readonly pending = new Set<string>();
  private draining = false;
  /** When watched tokens stop authenticating, and the timer set for the earliest. */
  private readonly wakes = new WakeHeap();
  private wakeTimer: NodeJS.Timeout | undefined;
  private wakeTimerAt = Number.POSITIVE_INFINITY;
  /** Connections not read while they drain, and the timer that looks at them. */
  private readonly blocked = new Set<WatchConnection>();
  private drainTimer: NodeJS.Timeout | undefined;
  /** Watches closed for holding most when a daemon-wide bound was passed. */
  closedForBounds = 0;
  /** Tokens clients reported as used since they were last recorded, with a secret each named them by. */
  private readonly usedSince = new Map<string, string>();
  private useTimer: NodeJS.Timeout | undefined;
  private wasStale = false;
  private readonly unsubscribe: () => void;
  /** Views as JSON text, by the view object (many clients watch one token: it is written once). */
  private readonly texts = new WeakMap<TokenAuthorizerResponse, string>();

  constructor(
    readonly deps: WatchDeps,
    readonly limits: WatchLimits = DEFAULT_WATCH_LIMITS,
  ) {
    this.unsubscribe = deps.onCommit((event) => this.committed(event));
  }

  /** A client's report, passed on. */
  report(r: ClientReport): void {
    this.deps.report?.(r);
  }

  /** A new connection from `address` opened with `credential`; `beatMs` as the client asked, within BEAT_RANGE. */
  open(socket: WatchSocket, beatMs: number, address: string, credential: WatchCredential, version = 2): WatchConnection {
    const beat = Math.min(BEAT_RANGE.max, Math.max(BEAT_RANGE.min, Number.isFinite(beatMs) ? beatMs : 10_000));
    const conn = new WatchConnection(this, socket, beat, address, credential, version);
    this.connections.add(conn);
    let same = this.byCredential.get(credential.accessor);
    if (same === undefined) this.byCredential.set(credential.accessor, (same = new Set()));
    same.add(conn);
    return conn;
  }

  /** Why `conn` may not watch `more` tokens besides those it holds (undefined: it may); the largest watches give way to the daemon's bound. */
  room(conn: WatchConnection, more: number): string | undefined {
    if ((this.perAddress.get(conn.address) ?? 0) + more > this.limits.tokensPerAddress)
      return `the watches from one address hold at most ${this.limits.tokensPerAddress} tokens`;
    if ((this.perCredential.get(conn.credential.accessor) ?? 0) + more > this.limits.tokensPerCredential)
      return `the watches of one token hold at most ${this.limits.tokensPerCredential} tokens`;
    while (this.tokens + more > this.limits.totalTokens) {
      const largest = this.largest((c) => c.items.size);
      if (largest === undefined || largest === conn || largest.items.size <= conn.items.size)
        return `this server's watches hold at most ${this.limits.totalTokens} tokens`;
      this.closeForBounds(largest, 'this server holds too many watched tokens; this watch held the most');
    }
    return undefined;
  }

  /** Connections and tokens watched now, the bytes waiting to be sent to them, and watches closed for the bounds (metrics). */
  get size(): { connections: number; tokens: number; queuedBytes: number; queuedBytesMax: number; closedForBounds: number } {
    let queuedBytes = 0;
    let queuedBytesMax = 0;
    for (const c of this.connections) {
      const b = c.socket.buffered();
      queuedBytes += b;
      queuedBytesMax = Math.max(queuedBytesMax, b);
    }
    return { connections: this.connections.size, tokens: this.tokens, queuedBytes, queuedBytesMax, closedForBounds: this.closedForBounds };
  }

  close(): void {
    this.unsubscribe();
    clearTimeout(this.useTimer);
    clearTimeout(this.wakeTimer);
    clearInterval(this.drainTimer);
    this.recordUses();
    for (const c of [...this.connections]) c.end(1001, 'the server is shutting down');
  }

  forget(conn: WatchConnection): void {
    this.connections.delete(conn);
    this.blocked.delete(conn);
    const same = this.byCredential.get(conn.credential.accessor);
    if (same?.delete(conn) && same.size === 0) this.byCredential.delete(conn.credential.accessor);
  }

  /**
   * Adds a token to a connection's watch; answers it at once when the client's hash is not the
   * current one. On a version 3 watch a secret this server does not authenticate now is first
   * looked up as a request's token would be (`looked`: it has been).
   */
  add(conn: WatchConnection, id: number, secret: string, hash: string, seq: number, looked = false): void {
    const existing = conn.items.get(id);
    if (existing !== undefined) {
      // Added again: what was sent for it stands (a client cannot make the server repeat a view).
      if (existing.secret === secret) return;
      this.remove(conn, id);
    }
    const answer = this.viewOrNothing(secret);
    if (answer === undefined) {
      if (conn.looksUp && !looked) return lookUpEntry(this.deps, conn, id, secret, seq, (o) => this.looked(conn, id, secret, hash, seq, o));
      if (!looked && !this.deps.known(secret) && !conn.presentedUnknown(secret)) return;
      conn.lost(id);
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
    this.count(conn, 1);
    this.index(item, answer);
    if (answer.hash !== hash) conn.owe(item, seq);
  }

  private looked(conn: WatchConnection, id: number, secret: string, hash: string, seq: number, outcome: LookUpOutcome): void {
    if (outcome === 'found') return this.add(conn, id, secret, hash, seq, true);
    if (outcome === 'gone') return conn.lost(id);
    conn.refuse(id, outcome.status, outcome.retryAfter);
  }

  remove(conn: WatchConnection, id: number): void {
    const item = conn.items.get(id);
    if (item === undefined) return;
    conn.items.delete(id);
    conn.dropped(item);
    this.count(conn, -1);
    this.unindex(item);
  }

  private count(conn: WatchConnection, n: number): void {
    this.tokens += n;
    const add = (map: Map<string, number>, key: string): void => {
      const left = (map.get(key) ?? 0) + n;
      if (left > 0) map.set(key, left);
      else map.delete(key);
    };
    add(this.perAddress, conn.address);
    add(this.perCredential, conn.credential.accessor);
  }

  /** The item's current answer, or undefined when its secret no longer authenticates as the token it named. */
  currentAnswer(item: Item): WatchedAnswer | undefined {
    const answer = this.viewOrNothing(item.secret);
    return answer?.accessor === item.accessor ? answer : undefined;
  }

  /** The AccessorID a watched item names, while its secret authenticates (reports and uses are believed only then). */
  liveAccessor(item: Item | undefined): string | undefined {
    return item === undefined ? undefined : this.currentAnswer(item)?.accessor;
  }

  /**
   * The view as JSON text, made once per view object; a view whose secret ends also says, as it
   * is sent, the seconds it has left (judged by the client on its monotonic clock).
   */
  viewText(answer: WatchedAnswer, nowMs: number): string {
    let text = this.texts.get(answer.view);
    if (text === undefined) this.texts.set(answer.view, (text = JSON.stringify(answer.view)));
    const ends = answer.view.ExpirationTime;
    if (ends === undefined) return text;
    const left = Math.round(Math.max(0, Date.parse(ends) - nowMs)) / 1000;
    return `${text.slice(0, -1)},"SecondsLeft":${Number.isFinite(left) ? left : 0}}`;
  }

  /**
   * Tokens a client judged: recorded as used once every USE_EVERY_MS for all clients together
   * (a token a hundred clients use is one use, not a hundred: last use is kept to the minute),
   * each only if the secret it was watched by authenticates then.
   */
  used(conn: WatchConnection, ids: readonly number[]): void {
    for (const id of ids) {
      const item = conn.items.get(id);
      if (item !== undefined && !this.usedSince.has(item.accessor)) this.usedSince.set(item.accessor, item.secret);
    }
    if (this.usedSince.size > 0 && this.useTimer === undefined) {
      this.useTimer = setTimeout(() => this.recordUses(), USE_EVERY_MS);
      this.useTimer.unref();
    }
  }

  private recordUses(): void {
    this.useTimer = undefined;
    const now = this.deps.now();
    for (const [accessor, secret] of this.usedSince) {
      if (this.viewOrNothing(secret)?.accessor === accessor) this.deps.recordUse(accessor, now);
    }
    this.usedSince.clear();
  }

  /**
   * A connection's beat: first whether its own token still holds (else it ends); held back while
   * a wide change is being judged, or while global tokens cannot be confirmed.
   */
  beat(conn: WatchConnection): void {
    if (!this.deps.credentialHolds(conn.credential)) return conn.end(1008, "the watch's own token no longer authenticates with acl:read");
    const stale = this.deps.stale();
    if (stale !== this.wasStale) {
      this.wasStale = stale;
      // Global tokens cannot be confirmed any more (or can again): every watched token is judged again.
      this.judgeAll();
    }
    if (this.pending.size > 0 || stale) return;
    conn.beat();
  }

  /** A connection stopped being read: it is looked at until it drains, and the daemon-wide bound of queued bytes is kept. */
  blockedOn(conn: WatchConnection): void {
    this.blocked.add(conn);
    this.keepQueuedBound();
    this.drainTimer ??= setInterval(() => this.pollBlocked(), DRAIN_POLL_MS);
  }

  private pollBlocked(): void {
    for (const c of [...this.blocked]) {
      c.drained();
      if (!c.blocked) this.blocked.delete(c);
    }
    this.keepQueuedBound();
    if (this.blocked.size === 0) {
      clearInterval(this.drainTimer);
      this.drainTimer = undefined;
    }
  }

  /** Past the daemon-wide bound of bytes waiting for watches, the connections holding most are closed first. */
  private keepQueuedBound(): void {
    let total = 0;
    for (const c of this.connections) total += c.socket.buffered();
    while (total > this.limits.totalBytes) {
      const largest = this.largest((c) => c.socket.buffered());
      if (largest === undefined) return;
      total -= largest.socket.buffered();
      this.closeForBounds(largest, 'this server holds too much for watches that do not read; this watch held the most');
    }
  }

  private largest(measure: (c: WatchConnection) => number): WatchConnection | undefined {
    let pick: WatchConnection | undefined;
    let most = -1;
    for (const c of this.connections) {
      const m = measure(c);
      if (m > most) {
        most = m;
        pick = c;
      }
    }
    return pick;
  }

  private closeForBounds(conn: WatchConnection, reason: string): void {
    this.closedForBounds++;
    conn.end(1013, reason);
  }

  private index(item: Item, answer: WatchedAnswer): void {
    let watched = this.byAccessor.get(item.accessor);
    if (watched === undefined) {
      watched = { items: new Set([item]), dependsOn: answer.dependsOn, secret: item.secret, wakeAt: Number.POSITIVE_INFINITY };
      this.byAccessor.set(item.accessor, watched);
      for (const d of answer.dependsOn) this.depend(d, item.accessor);
    } else {
      watched.items.add(item);
      this.dependOn(item.accessor, watched, answer.dependsOn);
    }
    this.wakeFor(item.accessor, watched, answer);
  }

  private unindex(item: Item): void {
    const watched = this.byAccessor.get(item.accessor);
    if (watched === undefined || !watched.items.delete(item) || watched.items.size > 0) return;
    this.byAccessor.delete(item.accessor);
    for (const d of watched.dependsOn) this.undepend(d, item.accessor);
  }

  /** The token is judged again the moment the secret this answer was given for stops authenticating. */
  private wakeFor(accessor: string, watched: Watched, answer: WatchedAnswer): void {
    const ends = answer.view.ExpirationTime === undefined ? Number.NaN : Date.parse(answer.view.ExpirationTime);
    if (!Number.isFinite(ends)) return;
    const now = this.deps.now();
    if (ends >= watched.wakeAt && watched.wakeAt > now) return;
    watched.wakeAt = ends;
    this.wakes.push(ends, accessor);
    this.armWake();
  }

  private armWake(): void {
    const next = this.wakes.peek();
    if (next === undefined || next >= this.wakeTimerAt) return;
    clearTimeout(this.wakeTimer);
    this.wakeTimerAt = next;
    this.wakeTimer = setTimeout(() => this.woken(), Math.min(MAX_TIMER_MS, Math.max(0, next - this.deps.now()) + 1));
    this.wakeTimer.unref();
  }

  private woken(): void {
    this.wakeTimer = undefined;
    this.wakeTimerAt = Number.POSITIVE_INFINITY;
    const now = this.deps.now();
    while ((this.wakes.peek() ?? Number.POSITIVE_INFINITY) <= now) {
      const accessor = this.wakes.pop() as string;
      const watched = this.byAccessor.get(accessor);
      if (watched === undefined) continue;
      watched.wakeAt = Number.POSITIVE_INFINITY;
      this.pending.add(accessor);
    }
    this.armWake();
    this.drain();
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
    this.recheckCredentials(event);
    if (this.byAccessor.size === 0) return;
    const changed = event.changed;
    if (changed === undefined) return this.judgeAll();
    for (const a of changed.tokens) if (this.byAccessor.has(a)) this.pending.add(a);
    for (const id of [...changed.policies, ...changed.roles]) for (const a of this.byDependency.get(id) ?? []) this.pending.add(a);
    this.drain();
  }

  /** Watches whose own token changed, or may have lost its right with a policy or role: those that no longer hold end. */
  private recheckCredentials(event: CommitEvent): void {
    if (this.connections.size === 0) return;
    const changed = event.changed;
    const everyone = changed === undefined || changed.policies.length > 0 || changed.roles.length > 0;
    const conns = everyone ? [...this.connections] : changed.tokens.flatMap((a) => [...(this.byCredential.get(a) ?? [])]);
    for (const c of conns)
      if (c.open && !this.deps.credentialHolds(c.credential)) c.end(1008, "the watch's own token no longer authenticates with acl:read");
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

  /** Every item of one token judged again: its view owed where its hash moved; gone items dropped. */
  private judge(accessor: string, touched: Set<WatchConnection>): void {
    const watched = this.byAccessor.get(accessor);
    if (watched === undefined) return;
    // Items of one token share a secret (each is judged by its own, should they ever differ).
    const answers = new Map<string, WatchedAnswer | undefined>();
    for (const item of [...watched.items]) {
      if (!answers.has(item.secret)) answers.set(item.secret, this.viewOrNothing(item.secret));
      const answer = answers.get(item.secret);
      if (answer === undefined || answer.accessor !== accessor) {
        this.remove(item.conn, item.id);
        item.conn.lost(item.id);
      } else if (answer.hash !== item.hash) {
        item.conn.owe(item);
      } else {
        continue;
      }
      touched.add(item.conn);
    }
    if (this.byAccessor.get(accessor) !== watched) return;
    for (const answer of answers.values()) {
      if (answer?.accessor !== accessor) continue;
      this.dependOn(accessor, watched, answer.dependsOn);
      this.wakeFor(accessor, watched, answer);
    }
  }

  private viewOrNothing(secret: string): WatchedAnswer | undefined {
    try {
      return this.deps.view(secret);
    } catch {
      return undefined;
    }
  }
}
