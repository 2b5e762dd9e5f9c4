import WebSocket from 'ws';
import type { TokenAuthorizerResponse } from '../api/schemas.js';
import type { WatchwordClient } from './client.js';
import { sleep } from './failures.js';

/** The server's end: src/service/authorizer-watch.ts (the frames are described there). */
const WATCH_PATH = '/v1/internal/acl/authorizer/watch';
/** Tokens one watch frame adds at most (the server takes 5,000). */
const ADD_PER_FRAME = 2_000;

/** What the server says on a watch. */
export type WatchNews =
  | { t: 'changes'; ack: number; set: Array<[number, string, TokenAuthorizerResponse]>; gone: number[] }
  | { t: 'beat'; ack: number };

export interface TokenWatchOptions {
  /** The servers, in order of preference; the watch moves to the next when one cannot be reached. */
  clients: readonly WatchwordClient[];
  /** How often the server confirms the watch when nothing changes (ms). */
  beatMs: number;
  /** A connection opened: every token held is to be added again (`add`). */
  onOpen(): void;
  onNews(news: WatchNews): void;
  /** The connection ended or could not be made; `unsupported` when the server has no watch (an older daemon). */
  onLost(unsupported: boolean): void;
}

function isNews(v: unknown): v is WatchNews {
  if (v === null || typeof v !== 'object') return false;
  const f = v as Record<string, unknown>;
  if (!Number.isSafeInteger(f.ack)) return false;
  if (f.t === 'beat') return true;
  return f.t === 'changes' && Array.isArray(f.set) && Array.isArray(f.gone);
}

/**
 * One connection that keeps a set of tokens current (SPEC §20, "Enforcing clients at scale"):
 * a WebSocket to the daemon, opened again after 250 ms doubling to 5 s when it ends, to the next
 * server when one cannot be reached. Tokens are named by numbers the caller chooses; each
 * addition is sent with a sequence number the server acknowledges, so the caller knows which
 * tokens a beat confirms.
 */
export class TokenWatch {
  private ws: WebSocket | undefined;
  private open = false;
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
      const unsupported = await this.connectOnce();
      if (this.closed) return;
      this.failures++;
      if (unsupported) this.at = (this.at + 1) % this.options.clients.length;
      const wake = new AbortController();
      this.wake = wake;
      // An older daemon has no watch: asked again rarely.
      await sleep(unsupported ? 60_000 : Math.min(250 * 2 ** Math.min(this.failures - 1, 5), 5_000), wake.signal);
      this.wake = undefined;
    }
  }

  /** One connection, until it ends; resolves true when the server has no watch to offer. */
  private connectOnce(): Promise<boolean> {
    const client = this.options.clients[this.at] as WatchwordClient;
    return new Promise<boolean>((resolve) => {
      let tls: ReturnType<WatchwordClient['tlsSettings']>;
      try {
        tls = client.tlsSettings();
      } catch {
        this.options.onLost(false);
        return resolve(false);
      }
      const url = `${client.address.replace(/^http/, 'ws')}${WATCH_PATH}?beat=${Math.round(this.options.beatMs)}`;
      const ws = new WebSocket(url, { ...tls, perMessageDeflate: false, handshakeTimeout: 5_000, maxPayload: 256 * 1024 * 1024 });
      this.ws = ws;
      let unsupported = false;
      ws.on('unexpected-response', (_req, res) => {
        unsupported = res.statusCode === 404;
        res.resume();
        ws.terminate();
      });
      ws.on('open', () => {
        this.open = true;
        this.failures = 0;
        this.options.onOpen();
      });
      ws.on('message', (data, isBinary) => {
        if (isBinary) return;
        let news: unknown;
        try {
          news = JSON.parse(data.toString());
        } catch {
          return void ws.terminate();
        }
        if (!isNews(news)) return void ws.terminate();
        try {
          this.options.onNews(news);
        } catch {
          // An answer this client cannot read is the server's fault, never the service's crash: the watch starts over.
          ws.terminate();
        }
      });
      ws.on('error', () => undefined);
      ws.on('close', () => {
        const wasOpen = this.open;
        this.open = false;
        this.ws = undefined;
        this.queued = [];
        this.queuedSeq = undefined;
        // A server that cannot be reached: the next one is tried.
        if (!wasOpen && !unsupported) this.at = (this.at + 1) % this.options.clients.length;
        this.options.onLost(unsupported);
        resolve(unsupported);
      });
    });
  }
}
