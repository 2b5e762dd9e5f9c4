import { WatchwordApiError, type WatchwordClient } from './client.js';
import { failureOf, reasonOf } from './failures.js';

/** What a server set tells its owner: no server could be reached, and one answers again. */
export interface ServerSetEvents {
  down(since: number, reason: string): void;
  up(downForMs: number, address: string): void;
  /** A request passed over a server that could not be reached for the next. */
  failover(): void;
}

/**
 * The servers of a datacenter as an enforcing client asks them (client/authorizer.ts): one client
 * per address, the one that last answered asked first, the others in turn while servers cannot be
 * reached.
 */
export class ServerSet {
  private preferred = 0;
  /** Since when no server could be reached (undefined: one answers). */
  private downSince: number | undefined;

  constructor(
    /** One client per address, in the order given. */
    readonly clients: readonly WatchwordClient[],
    private readonly events: ServerSetEvents,
  ) {}

  /** Whether no server could be reached at the last try. */
  get down(): boolean {
    return this.downSince !== undefined;
  }

  /** The address asked first. */
  get address(): string {
    return (this.clients[this.preferred] as WatchwordClient).address;
  }

  /**
   * One request, to the preferred server and, while servers cannot be reached, to each of the
   * others in turn; the one that answers (even with an error: it is up) is preferred from then on.
   * `clients` are the same servers through other connections (blocking reads hold their own).
   */
  async ask<T>(
    stop: AbortSignal,
    request: (client: WatchwordClient) => Promise<T>,
    clients: readonly WatchwordClient[] = this.clients,
  ): Promise<T> {
    const first = this.preferred;
    let last: unknown;
    for (let i = 0; i < clients.length; i++) {
      const at = (first + i) % clients.length;
      try {
        const answer = await request(clients[at] as WatchwordClient);
        this.answeredBy(at);
        return answer;
      } catch (err) {
        if (stop.aborted) throw err;
        if (failureOf(err) !== 'unreachable') {
          if (err instanceof WatchwordApiError) this.answeredBy(at);
          throw err;
        }
        last = err;
        if (i + 1 < clients.length) this.events.failover();
      }
    }
    if (this.downSince === undefined) {
      this.downSince = Date.now();
      this.events.down(this.downSince, reasonOf(last));
    }
    throw last;
  }

  private answeredBy(at: number): void {
    this.preferred = at;
    if (this.downSince === undefined) return;
    const downForMs = Date.now() - this.downSince;
    this.downSince = undefined;
    this.events.up(downForMs, (this.clients[at] as WatchwordClient).address);
  }
}
