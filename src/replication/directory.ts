import type { Standing } from './placement.js';
import type { DatacenterInfo } from './protocol.js';

export interface DirectoryOptions {
  datacenter: string;
  /** The primary datacenter now, and (at a secondary) its servers' base URLs in order (docs/datacenters.md: a promotion moves it). */
  primary: () => Standing;
  /** Addresses an operator configured: they win over what datacenters report. */
  configured: Readonly<Record<string, string>>;
  /** This daemon's own base URL. */
  ownURL: () => string;
  /** A peer's base URL from the HOST:PORT it reported (the scheme is the transport's). */
  peerURL: (address: string) => string;
  /** What replication reports: the primary's sessions, or the list the primary pushes. */
  reported: () => DatacenterInfo[];
}

/**
 * Where each datacenter's daemon is, for `?dc=` forwarding and the catalog. Precedence:
 * this daemon itself, then configured addresses (and a secondary's configured primary),
 * then addresses datacenters reported over replication.
 */
export class DatacenterDirectory {
  constructor(private readonly options: DirectoryOptions) {}

  /** Known datacenters, primary first, the rest by name. */
  list(): Array<{ name: string; url: string }> {
    const o = this.options;
    const primary = o.primary();
    const urls = new Map<string, string>();
    for (const d of o.reported()) urls.set(d.name, o.peerURL(d.address));
    const firstPrimary = primary.addresses[0];
    if (firstPrimary !== undefined) urls.set(primary.primary, firstPrimary);
    for (const [name, url] of Object.entries(o.configured)) urls.set(name, url);
    urls.set(o.datacenter, o.ownURL());
    const others = [...urls.keys()].filter((n) => n !== primary.primary).sort();
    const names = urls.has(primary.primary) ? [primary.primary, ...others] : others;
    return names.map((name) => ({ name, url: urls.get(name) as string }));
  }

  urlOf(datacenter: string): string | undefined {
    return this.list().find((d) => d.name === datacenter)?.url;
  }

  /**
   * Where to send a request for a datacenter: its URL, or for the primary datacenter
   * (unless an operator configured another address) every configured server of it,
   * comma-separated, tried in turn, so `?dc=` reaches whichever is alive.
   */
  addressesOf(datacenter: string): string | undefined {
    const o = this.options;
    const primary = o.primary();
    if (
      datacenter === primary.primary &&
      datacenter !== o.datacenter &&
      o.configured[datacenter] === undefined &&
      primary.addresses.length > 0
    )
      return primary.addresses.join(',');
    return this.urlOf(datacenter);
  }
}
