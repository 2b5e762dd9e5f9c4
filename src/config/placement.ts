// What a configuration says about this server's place (config/schema.ts derives these from the
// settings): the primary or a secondary, how many servers its datacenter runs, its TLS.

/**
 * This datacenter's place among the others (docs/datacenters.md, "Multiple datacenters"): the primary, or a secondary
 * that knows where the primary's servers are.
 */
export type Placement =
  | { readonly role: 'primary' }
  | {
      readonly role: 'secondary';
      /** Every configured server of the primary datacenter (primary_address), in order. */
      readonly primaryAddresses: readonly string[];
    };

/** How many servers this datacenter runs and how its leader is chosen (docs/servers.md, "Several servers per datacenter"). */
export type ServerMode =
  | { readonly kind: 'single' }
  | { readonly kind: 'static'; readonly peers: readonly string[]; readonly syncFollowers: number }
  | { readonly kind: 'etcd'; readonly endpoints: readonly string[]; readonly leaseMs: number; readonly syncFollowers: number };

/** TLS for the API listener and every server-to-server channel (docs/tls.md, "TLS"); undefined: plain HTTP. */
export interface TlsSettings {
  readonly caFile: string | undefined;
  readonly certFile: string;
  readonly keyFile: string;
  readonly verifyIncoming: boolean;
  readonly verifyOutgoing: boolean;
  readonly verifyServerHostname: boolean;
  readonly domain: string;
  readonly minVersion: 'TLSv1.2' | 'TLSv1.3';
}

export function tlsOf(c: {
  tls_ca_file?: string | undefined;
  tls_cert_file?: string | undefined;
  tls_key_file?: string | undefined;
  tls_verify_incoming: boolean;
  tls_verify_outgoing: boolean;
  tls_verify_server_hostname: boolean;
  tls_domain: string;
  tls_min_version: 'TLSv1.2' | 'TLSv1.3';
}): TlsSettings | undefined {
  if (c.tls_cert_file === undefined || c.tls_key_file === undefined) return undefined;
  return {
    caFile: c.tls_ca_file,
    certFile: c.tls_cert_file,
    keyFile: c.tls_key_file,
    verifyIncoming: c.tls_verify_incoming,
    verifyOutgoing: c.tls_verify_outgoing,
    verifyServerHostname: c.tls_verify_server_hostname,
    domain: c.tls_domain,
    minVersion: c.tls_min_version,
  };
}

export function placementOf(datacenter: string, primaryDatacenter: string, primaryAddress: string | undefined, tls: boolean): Placement {
  if (datacenter === primaryDatacenter) return { role: 'primary' };
  // The refinement above guarantees an address on a secondary.
  return {
    role: 'secondary',
    primaryAddresses: (primaryAddress ?? '')
      .split(',')
      .map((u) => u.trim())
      .filter(Boolean)
      .map((u) => peerBaseURL(u, tls)),
  };
}

/** A peer's base URL: a bare HOST:PORT takes the scheme of this server's TLS settings, and TLS on means https. */
export function peerBaseURL(address: string, tls: boolean): string {
  const url = new URL(/^[a-z]+:\/\//i.test(address) ? address : `http://${address}`);
  if (tls) url.protocol = 'https:';
  return url.origin;
}

export function serverModeOf(coordinator: string | undefined, peers: string[], leaseMs: number, syncFollowers: number): ServerMode {
  if (coordinator !== undefined) {
    const [scheme, hosts] = coordinator.split('://') as [string, string];
    const secure = scheme === 'etcds' || scheme === 'https';
    return { kind: 'etcd', endpoints: hosts.split(',').map((h) => `${secure ? 'https' : 'http'}://${h}`), leaseMs, syncFollowers };
  }
  if (peers.length > 1) return { kind: 'static', peers, syncFollowers };
  return { kind: 'single' };
}
