import WebSocket from 'ws';
import { WATCH_LOOKUPS, type WatchServerFrame, parseServerFrame } from '../api/watch-frames.js';
import { WATCH_PROTOCOL } from '../version.js';
import type { WatchwordClient } from './client.js';
import { sleep } from './failures.js';

/** The server's end: src/service/authorizer-watch.ts (the frames are declared in src/api/watch-frames.ts). */
const WATCH_PATH = '/v1/internal/acl/authorizer/watch';
/** Tokens one watch frame adds at most (the server takes 5,000). */
const ADD_PER_FRAME = 2_000;

/** What the server says on a watch. */
export type WatchNews = WatchServerFrame;

/**
 * Why a watch is not open: `lost` (it ended, or the server could not be reached: tried again
 * soon), `refused` (the server answered the upgrade with a 4xx: no watch for this token, an older
 * daemon, a proxy that does not carry WebSocket upgrades; tried again rarely).
 */
export type WatchLoss = 'lost' | 'refused';

export interface TokenWatchOptions {
  /** The servers, in order of preference; the watch moves to the next when one cannot be reached. */
  clients: readonly WatchwordClient[];
  /** The client's own token, which opens the watch (it needs acl:read). */
  token: string;
  /** How often the server confirms the watch when nothing changes (ms). */
  beatMs: number;
  /** A connection opened: every token held is to be added again (`add`). */
  onOpen(): void;
  onNews(news: WatchNews): void;
  /** The connection ended or could not be made, and why (with the server's words when it refused). */
  onLost(loss: WatchLoss, reason: string): void;
}

/** How long a refused watch waits before it is asked for again. */
const REFUSED_RETRY_MS = 60_000;

/**
 * One connection that keeps a set of tokens current (docs/enforcing-client.md):
 * a WebSocket to the daemon, opened again after 250 ms doubling to 5 s when it ends, to the next
 * server when one cannot be reached. Tokens are named by numbers the caller chooses; each
 * addition is sent with a sequence number the server acknowledges, so the caller knows which
 * tokens a beat confirms.
 */
export class TokenWatch {
  private ws: WebSocket | undefined;
  private open = false;
  /** The protocol the server answered the open watch with (an older one names none: 2). */
  private version = 2;
  private seq = 0;
  private at = 0;
  private failures = 0;
  private closed = false;
  private wake: AbortController | undefined;
  /** Additions waiting for the next frame, sent together on the next turn of the event loop. */
  private queued: Array<[number, string, string]> = [];
  private queuedSeq: number | undefined;
  private removals: number[] = [];

  constructor(private readonly options: TokenWatchOptions) {
    void this.run();
  }

  /** Adds tokens to the watch; returns the sequence number whose acknowledgement confirms them (undefined: not connected). */
  add(id: number, secret: string, hash: string): number | undefined {
    if (!this.open) return undefined;
    this.queued.push([id, secret, hash]);
    if (this.queuedSeq === undefined) {
      this.queuedSeq = ++this.seq;
      setImmediate(() => this.sendQueued());
    }
    if (this.queued.length >= ADD_PER_FRAME) this.sendQueued();
    return this.queuedSeq ?? this.seq;
  }

  /** Removes tokens from the watch (sent together on the next turn of the event loop). */
  remove(ids: number[]): void {
    if (!this.open || ids.length === 0) return;
    if (this.removals.length === 0)
      setImmediate(() => {
        const batch = this.removals;
        this.removals = [];
        if (this.open && batch.length > 0) this.send({ t: 'unwatch', ids: batch });
      });
    this.removals.push(...ids);
  }

  used(ids: number[]): void {
    if (this.open && ids.length > 0) this.send({ t: 'used', ids });
  }

  /** Sends a report of decisions (decision-reports.ts); false when not connected (the report is then dropped). */
  report(frame: object): boolean {
    if (!this.open) return false;
    this.send({ t: 'report', ...frame });
    return true;
  }

  /** Whether the watch is open now. */
  get isOpen(): boolean {
    return this.open;
  }

  /** Whether the open watch takes first look-ups (a daemon of this release; an older one does not). */
  get looksUp(): boolean {
    return this.open && this.version >= WATCH_LOOKUPS;
  }

  /** Tries to connect at once if the watch is waiting to try again. */
  kick(): void {
    this.wake?.abort();
  }

  close(): void {
    this.closed = true;
    this.wake?.abort();
    this.ws?.terminate();
  }

  private sendQueued(): void {
    if (this.queuedSeq === undefined) return;
    const frame = { t: 'watch', seq: this.queuedSeq, add: this.queued };
    this.queued = [];
    this.queuedSeq = undefined;
    if (this.open) this.send(frame);
  }

  private send(frame: object): void {
    this.ws?.send(JSON.stringify(frame));
  }

  private async run(): Promise<void> {
    while (!this.closed) {
      const loss = await this.connectOnce();
      if (this.closed) return;
      this.failures++;
      if (loss === 'refused') this.at = (this.at + 1) % this.options.clients.length;
      const wake = new AbortController();
      this.wake = wake;
      // A refused watch (no right, an older daemon, a proxy in the way) is asked for again rarely.
      await sleep(loss === 'refused' ? REFUSED_RETRY_MS : Math.min(250 * 2 ** Math.min(this.failures - 1, 5), 5_000), wake.signal);
      this.wake = undefined;
    }
  }

  /** One connection, until it ends; resolves how it ended. */
  private connectOnce(): Promise<WatchLoss> {
    const client = this.options.clients[this.at] as WatchwordClient;
    return new Promise<WatchLoss>((resolve) => {
      let tls: ReturnType<WatchwordClient['tlsSettings']>;
      try {
        tls = client.tlsSettings();
      } catch (err) {
        this.options.onLost('lost', (err as Error).message);
        return resolve('lost');
      }
      const versions = `version=${WATCH_PROTOCOL.min}&max=${WATCH_PROTOCOL.max}`;
      const url = `${client.address.replace(/^http/, 'ws')}${WATCH_PATH}?beat=${Math.round(this.options.beatMs)}&${versions}`;
      const ws = new WebSocket(url, {
        ...tls,
        headers: { 'X-Service-Token': this.options.token },
        perMessageDeflate: false,
        handshakeTimeout: 5_000,
        maxPayload: 256 * 1024 * 1024,
      });
      this.ws = ws;
      let refused: string | undefined;
      ws.on('upgrade', (res) => {
        const said = Number(res.headers['x-service-watch-protocol']);
        this.version = Number.isSafeInteger(said) && said >= WATCH_PROTOCOL.min && said <= WATCH_PROTOCOL.max ? said : 2;
      });
      ws.on('unexpected-response', (_req, res) => {
        // A 4xx is an answer: no watch here for this client. A 5xx is an outage, tried again soon.
        const status = res.statusCode ?? 0;
        if (status >= 400 && status < 500) refused = `the server answered the watch with ${status}`;
        let said = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          if (said.length < 300) said += chunk;
        });
        res.on('end', () => {
          if (refused !== undefined && said.trim() !== '') refused = `${refused}: ${said.trim().slice(0, 300)}`;
          ws.terminate();
        });
        res.on('error', () => ws.terminate());
        setTimeout(() => ws.terminate(), 1_000).unref();
      });
      ws.on('open', () => {
        this.open = true;
        this.failures = 0;
        this.options.onOpen();
      });
      ws.on('message', (data, isBinary) => {
        if (isBinary) return;
        const news = parseServerFrame(data.toString());
        if (news === undefined) return void ws.terminate();
        try {
          this.options.onNews(news);
        } catch {
          // An answer this client cannot read is the server's fault, never the service's crash: the watch starts over.
          ws.terminate();
        }
      });
      let error = '';
      ws.on('error', (err) => {
        error = err.message;
      });
      ws.on('close', (code, why) => {
        const wasOpen = this.open;
        this.open = false;
        this.ws = undefined;
        this.queued = [];
        this.queuedSeq = undefined;
        // A server that cannot be reached: the next one is tried.
        if (!wasOpen && refused === undefined) this.at = (this.at + 1) % this.options.clients.length;
        const loss: WatchLoss = refused !== undefined ? 'refused' : 'lost';
        this.options.onLost(loss, refused ?? (wasOpen ? `the watch ended (${code} ${why.toString()})` : error || 'cannot connect'));
        resolve(loss);
      });
    });
  }
}
