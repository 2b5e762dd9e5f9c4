import { MAX_WATCHED, type RefusedEntry, type ReportFrame, WATCH_LOOKUPS, parseClientFrame } from '../api/watch-frames.js';
import { quoteJSON } from '../domain/json-text.js';
import { type ClientReport, ReportIntake } from './watch-reports.js';
import type { WatchCredential, WatchDeps, WatchLimits, WatchSocket, WatchedAnswer } from './watch-types.js';

// One enforcing client's watch (service/authorizer-watch.ts holds them all): the tokens it holds by
// its numbers, what it is owed, and the frames it sends and receives.

/** A frame of views holds about this many bytes of them (one view may make it more). */
const FRAME_BYTES = 64 * 1024;

export interface Item {
  readonly conn: WatchConnection;
  readonly id: number;
  readonly secret: string;
  readonly accessor: string;
  /** The hash of the view the client holds (as it said, or as last sent). */
  hash: string;
  /** The watch frame whose answer this item's owed view is (undefined: owed since a commit, or not owed). */
  owedBy?: number;
}

/** What a connection asks of the watches it belongs to (service/authorizer-watch.ts). */
export interface WatchHub {
  readonly deps: WatchDeps;
  readonly limits: WatchLimits;
  beat(conn: WatchConnection): void;
  room(conn: WatchConnection, more: number): string | undefined;
  add(conn: WatchConnection, id: number, secret: string, hash: string, seq: number, looked?: boolean): void;
  remove(conn: WatchConnection, id: number): void;
  forget(conn: WatchConnection): void;
  used(conn: WatchConnection, ids: readonly number[]): void;
  blockedOn(conn: WatchConnection): void;
  currentAnswer(item: Item): WatchedAnswer | undefined;
  liveAccessor(item: Item | undefined): string | undefined;
  viewText(answer: WatchedAnswer, nowMs: number): string;
  report(r: ClientReport): void;
}

/** One client's watch: the tokens it holds by its numbers, and what it is owed. */
export class WatchConnection {
  readonly items = new Map<number, Item>();
  /** The last watch frame applied, and the last ack sent. */
  ack = 0;
  private sentAck = 0;
  /** Items whose current view the client is owed, in the order they became owed. */
  private readonly owed = new Set<Item>();
  private gone: number[] = [];
  /** Entries a first look-up could not answer now (version 3). */
  private refused: RefusedEntry[] = [];
  /** First look-ups under way (version 3): the secret each id was added with. */
  readonly looking = new Map<number, string>();
  /** Watch frames with answers still owed, oldest first: [seq, answers owed]; none is acknowledged before its answers are sent. */
  private owing: Array<[number, number]> = [];
  private owingHead = 0;
  private timer: NodeJS.Timeout | undefined;
  /** Not read while what waits to be sent to it is past the bound. */
  blocked = false;
  /** Secrets presented that no token holds. */
  private unknown = 0;
  private readonly reports = new ReportIntake();

  constructor(
    private readonly hub: WatchHub,
    readonly socket: WatchSocket,
    beatMs: number,
    /** The client's address. */
    readonly address: string,
    readonly credential: WatchCredential,
    /** The watch protocol this connection speaks (version.ts, WATCH_PROTOCOL). */
    readonly version = 2,
  ) {
    this.timer = setInterval(() => hub.beat(this), beatMs);
    this.timer.unref();
  }

  get open(): boolean {
    return this.timer !== undefined;
  }

  /** Whether its additions are first look-ups (version 3). */
  get looksUp(): boolean {
    return this.version >= WATCH_LOOKUPS;
  }

  /** A frame from the client; a frame that cannot be understood ends the connection with the reason. */
  receive(text: string): void {
    if (!this.open) return;
    const frame = parseClientFrame(text);
    if (typeof frame === 'string') return this.end(1008, frame);
    switch (frame.t) {
      case 'watch': {
        if (this.items.size + this.looking.size + frame.add.length > MAX_WATCHED)
          return this.end(1008, `a watch holds at most ${MAX_WATCHED} tokens`);
        const refusal = this.hub.room(this, frame.add.length);
        if (refusal !== undefined) return this.end(1008, refusal);
        for (const [id, secret, hash] of frame.add) {
          if (secret === '') return this.end(1008, 'the anonymous token is not watched: ask for anonymous decisions over HTTP');
          this.hub.add(this, id, secret, hash, frame.seq);
          if (!this.open) return;
        }
        this.ack = Math.max(this.ack, frame.seq);
        return this.flush();
      }
      case 'unwatch':
        for (const id of frame.ids) {
          this.looking.delete(id);
          this.hub.remove(this, id);
        }
        return this.flush();
      case 'report':
        return this.report(frame);
      case 'used':
        return this.hub.used(this, frame.ids);
    }
  }

  /** A secret no token holds was presented; false when the connection ends for it. */
  presentedUnknown(secret: string): boolean {
    this.unknown++;
    const withinBudget = this.hub.deps.unknownSecret(secret, this.address);
    if (!withinBudget) this.end(1008, 'too many unknown secrets from this address: the watch is closed');
    else if (this.unknown > this.hub.limits.unknownPerWatch)
      this.end(1008, `more than ${this.hub.limits.unknownPerWatch} secrets no token holds: the watch is closed`);
    return this.open;
  }

  /** Its reports of decisions, taken at most twice a second (watch-reports.ts), about tokens whose secrets authenticate now. */
  private report(frame: ReportFrame): void {
    const r = this.reports.take(frame, (id) => this.hub.liveAccessor(this.items.get(id)), {
      address: this.address,
      credential: this.credential.accessor,
    });
    if (r !== undefined) this.hub.report(r);
  }

  /** The connection ended (either side): its tokens are no longer watched. */
  closed(): void {
    if (!this.open) return;
    clearInterval(this.timer);
    this.timer = undefined;
    for (const id of [...this.items.keys()]) this.hub.remove(this, id);
    this.owed.clear();
    this.looking.clear();
    this.hub.forget(this);
  }

  /** The client is owed this item's current view (as the answer to watch frame `seq`, when given). */
  owe(item: Item, seq?: number): void {
    if (this.owed.has(item)) return;
    this.owed.add(item);
    if (seq === undefined) return;
    item.owedBy = seq;
    this.owes(seq);
  }

  /**
   * A first look-up of watch frame `seq` is under way: the frame is not acknowledged until it is
   * answered. Call the function returned once its answer is owed (or it is dropped).
   */
  hold(seq: number): () => void {
    this.owes(seq);
    let held = true;
    return () => {
      if (held) this.paid(seq);
      held = false;
    };
  }

  /** Frame `seq` owes one more answer (the entries stay in the order of their frames). */
  private owes(seq: number): void {
    for (let i = this.owing.length - 1; i >= this.owingHead; i--) {
      const entry = this.owing[i] as [number, number];
      if (entry[0] === seq) return void entry[1]++;
      if (entry[0] < seq) return void this.owing.splice(i + 1, 0, [seq, 1]);
    }
    this.owing.splice(this.owingHead, 0, [seq, 1]);
  }

  /** The item is no longer owed (sent, or gone). */
  private settle(item: Item): void {
    this.owed.delete(item);
    const seq = item.owedBy;
    if (seq === undefined) return;
    item.owedBy = undefined;
    this.paid(seq);
  }

  /** One answer frame `seq` owed is given. */
  private paid(seq: number): void {
    for (let i = this.owingHead; i < this.owing.length; i++) {
      const entry = this.owing[i] as [number, number];
      if (entry[0] !== seq) continue;
      entry[1]--;
      break;
    }
    while (this.owingHead < this.owing.length && (this.owing[this.owingHead] as [number, number])[1] === 0) this.owingHead++;
    if (this.owingHead > 1024 && this.owingHead * 2 > this.owing.length) {
      this.owing = this.owing.slice(this.owingHead);
      this.owingHead = 0;
    }
  }

  /** An item leaves the watch (unwatched, gone, the connection ends). */
  dropped(item: Item): void {
    if (this.owed.has(item)) this.settle(item);
  }

  /** The client is told the token it named `id` no longer authenticates. */
  lost(id: number): void {
    this.gone.push(id);
  }

  /** The client is told its first look-up `id` cannot be answered now, as a request would have been (status, Retry-After). */
  refuse(id: number, status: number, retryAfter: number): void {
    this.refused.push([id, status, retryAfter]);
  }

  /** The ack the client may be told: the last watch frame whose every view has been sent. */
  private ackToSend(): number {
    const head = this.owing[this.owingHead];
    return head === undefined ? this.ack : Math.min(this.ack, head[0] - 1);
  }

  /** Sends what the client is owed while it reads, then the ack when it moved. */
  flush(): void {
    while (this.open && !this.blocked && (this.gone.length > 0 || this.refused.length > 0 || this.owed.size > 0)) {
      const gone = this.gone;
      this.gone = [];
      const refused = this.refused;
      this.refused = [];
      const set: string[] = [];
      let bytes = 0;
      for (const item of this.owed) {
        this.settle(item);
        const answer = this.hub.currentAnswer(item);
        if (answer === undefined) {
          this.hub.remove(this, item.id);
          gone.push(item.id);
          continue;
        }
        if (answer.hash === item.hash) continue;
        item.hash = answer.hash;
        const view = this.hub.viewText(answer, this.hub.deps.now());
        set.push(`[${item.id},${quoteJSON(answer.hash)},${view}]`);
        bytes += view.length;
        if (bytes >= FRAME_BYTES) break;
      }
      if (set.length === 0 && gone.length === 0 && refused.length === 0) continue;
      this.sendChanges(set, gone, refused);
    }
    if (this.open && !this.blocked && this.ackToSend() !== this.sentAck) this.sendChanges([], [], []);
  }

  private sendChanges(set: string[], gone: number[], refused: RefusedEntry[]): void {
    const ack = this.ackToSend();
    this.sentAck = ack;
    const refusals = refused.length > 0 ? `,"refused":${JSON.stringify(refused)}` : '';
    this.send(`{"t":"changes","ack":${ack},"set":[${set.join(',')}],"gone":[${gone.join(',')}]${refusals}}`);
  }

  /** Everything the client holds is current: said only when it is owed nothing. */
  beat(): void {
    if (!this.open || this.blocked || this.owed.size > 0 || this.gone.length > 0 || this.refused.length > 0) return;
    const ack = this.ackToSend();
    this.sentAck = ack;
    this.send(`{"t":"beat","ack":${ack}}`);
  }

  private send(text: string): void {
    this.socket.send(text);
    if (this.socket.buffered() >= this.hub.limits.connectionBytes) {
      this.blocked = true;
      this.socket.pause();
      this.hub.blockedOn(this);
    }
  }

  /** Read again once what waits for it has drained below half the bound; what it is owed is sent. */
  drained(): void {
    if (!this.blocked || this.socket.buffered() >= this.hub.limits.connectionBytes / 2) return;
    this.blocked = false;
    this.socket.resume();
    this.flush();
  }

  end(code: number, reason: string): void {
    if (!this.open) return;
    this.socket.close(code, reason);
    this.closed();
  }
}
