import type { Logger } from 'pino';
import { primaryPlacementResponse } from '../api/schemas.js';
import type { DatacenterInfo } from '../replication/protocol.js';
import type { Placement, PlacementRecord } from '../replication/placement.js';
import { META } from '../store/schema.js';
import type { Store } from '../store/store.js';
import { PeerClient } from '../transport/peer-client.js';
import type { Transport } from '../transport/transport.js';

export interface FinderOptions {
  /** The replication token (a secondary's): sent to learn the servers of a newer primary. */
  token?: string;
  datacenter: string;
  store: Pick<Store, 'getMeta' | 'transact'>;
  placement: Placement;
  transport: Transport;
  logger: Logger;
  /** datacenter_addresses, and the configured primary's first server (primary_address): name to address. */
  configured: Readonly<Record<string, string>>;
  /** Datacenters replication reports (the primary's sessions, or the list a primary pushes). */
  reported(): DatacenterInfo[];
  /** Whether this secondary's leader hears its primary now (then it asks less often). */
  primaryHeard(): boolean;
  /** How often a primary asks (and a secondary that hears its primary, six times as seldom); a secondary that does not, five times as often. */
  everyMs: number;
  /** A primary of a newer epoch was found: follow it. */
  follow(record: PlacementRecord): Promise<void>;
}

/**
 * Whether a primary outranks the one followed: a higher epoch, or (two secondaries promoted to the
 * same epoch at once) at an equal one, the name that sorts first, so that all end up following one.
 */
export function outranks(p: { Epoch: number; Primary: string }, epoch: number, primary: string): boolean {
  return p.Epoch > epoch || (p.Epoch === epoch && p.Primary < primary);
}

/** Asks this often even while the primary is heard (a forced promotion elsewhere), in ticks. */
const HEARD_EVERY_TICKS = 30;
/** Ticks per `everyMs`: a secondary that does not hear its primary asks at every tick. */
const TICKS_PER_PERIOD = 5;
const ASK_TIMEOUT_MS = 2000;

/**
 * How a datacenter's leader learns that a newer primary exists (docs/datacenters.md): it asks the other
 * datacenters it knows of (`datacenter_addresses` and `primary_address`; with TLS also those
 * replication reported and those known before, kept in the store so a restarted primary still
 * knows them) which primary they follow and its epoch. An answer of a higher epoch than the highest seen here is
 * followed: a returning old primary steps down, a secondary re-points. A server answers only what
 * it follows; the new primary itself is then reached through the transport, which checks its
 * identity (TLS) before any token is sent.
 */
export class PrimaryFinder {
  private timer: NodeJS.Timeout | undefined;
  private ticks = 0;
  private asking: Promise<void> | undefined;
  private readonly clients = new Map<string, PeerClient>();

  constructor(private readonly o: FinderOptions) {}

  start(): void {
    if (this.timer || this.o.everyMs <= 0) return;
    this.timer = setInterval(() => this.tick(), this.o.everyMs / TICKS_PER_PERIOD);
    this.timer.unref();
    this.poke();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Asks now (a stale primary was refused somewhere: a newer one exists). */
  poke(): void {
    this.asking ??= this.ask()
      .catch((err: unknown) => this.o.logger.warn({ err: (err as Error).message }, 'asking other datacenters for the primary failed'))
      .finally(() => (this.asking = undefined));
  }

  private tick(): void {
    this.ticks++;
    const primary = this.o.placement.isPrimary();
    if ((primary && this.ticks % TICKS_PER_PERIOD === 0) || (!primary && !this.o.primaryHeard()) || this.ticks % HEARD_EVERY_TICKS === 0)
      this.poke();
  }

  /**
   * Other datacenters this one knows of, by name: their base URLs. Without TLS that proves a
   * peer's datacenter, only the operator's addresses: a datacenter could report any address, and
   * whoever answers there could claim a newer primary and make this one step down.
   */
  private candidates(): Map<string, string> {
    const { transport, store, datacenter } = this.o;
    const out = new Map<string, string>();
    if (transport.verifiesPeers) {
      const known = (store.getMeta(META.knownDatacenters) ?? {}) as Record<string, string>;
      for (const [name, address] of Object.entries(known)) out.set(name, address);
      for (const d of this.o.reported()) out.set(d.name, transport.peerURL(d.address));
    }
    for (const [name, address] of Object.entries(this.o.configured)) out.set(name, transport.peerURL(address));
    out.delete(datacenter);
    return out;
  }

  private async ask(): Promise<void> {
    const candidates = this.candidates();
    // Kept for a later restart; a store that takes no write now (a transfer holding writes) does not stop the asking.
    await this.remember(candidates).catch(() => undefined);
    const answers = await Promise.all(
      [...candidates].map(async ([name, url]) => {
        let client = this.clients.get(url);
        if (!client) this.clients.set(url, (client = new PeerClient(url, name, this.o.transport.fetcher({ datacenter: name }))));
        try {
          // The replication token tells the primary's servers; without it only the primary and epoch are answered.
          const token = this.o.token;
          const res = await client.request(
            'GET',
            '/v1/internal/primary',
            token ? { 'X-Service-Token': token } : {},
            undefined,
            ASK_TIMEOUT_MS,
          );
          if (res.status !== 200) return undefined;
          const parsed = primaryPlacementResponse.safeParse(JSON.parse(res.text));
          // Only what a datacenter says of itself, or of the primary it follows, under its own name.
          return parsed.success && parsed.data.Datacenter === name ? { ...parsed.data, url } : undefined;
        } catch {
          return undefined;
        }
      }),
    );
    let best: (typeof answers)[number];
    for (const a of answers) if (a && (!best || outranks(a, best.Epoch, best.Primary))) best = a;
    if (!best || !outranks(best, this.o.placement.epoch(), this.o.placement.primaryDatacenter())) return;
    const addresses = best.Primary === best.Datacenter ? [best.url, ...best.Addresses] : best.Addresses;
    this.o.logger.warn(
      { primary: best.Primary, epoch: best.Epoch, told: best.Datacenter, seen: this.o.placement.epoch() },
      'a primary of a newer epoch exists: following it',
    );
    await this.o.follow({ Primary: best.Primary, Epoch: best.Epoch, Addresses: [...new Set(addresses)].slice(0, 64) });
  }

  /**
   * The datacenters known now are added to those known before and kept, so that after a restart
   * (a returning old primary) they can still be asked, those that were away at the time too.
   */
  private async remember(candidates: Map<string, string>): Promise<void> {
    const known = (this.o.store.getMeta(META.knownDatacenters) ?? {}) as Record<string, string>;
    const now = { ...known, ...Object.fromEntries(candidates) };
    if (Object.keys(now).length > 256 || Object.entries(now).every(([name, url]) => known[name] === url)) return;
    await this.o.store.transact((tx) => tx.putMeta(META.knownDatacenters, now));
  }
}
