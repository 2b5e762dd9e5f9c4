import { createHmac } from 'node:crypto';

/** The header of a replication upgrade's answer that hands a secondary its forwarding key (base64url). */
export const FORWARD_KEY_HEADER = 'x-service-forward-key';

/**
 * The keys servers of two datacenters vouch for forwarded clients with (forward-proof.ts): one per
 * secondary datacenter, shared with the primary datacenter. Every server of the primary derives
 * the same key from its datacenter's own key (kept in its store, made by its first leader), and
 * hands it to a secondary in the answer to its replication upgrade, once that upgrade is
 * authenticated (its replication token, and with TLS its certificate). The secondary keeps it in
 * memory only and has it again at every reconnect. The key is named `dc:<secondary>`.
 */
export class ForwardKeys {
  /** At a secondary's leader: the key its primary handed it, and that primary's datacenter. */
  private held: { primary: string; key: Buffer } | undefined;

  constructor(
    /** This server's datacenter. */
    private readonly datacenter: string,
    /** This datacenter's own key (undefined until its first leader made it). */
    private readonly datacenterKey: () => Uint8Array | undefined,
  ) {}

  /** The key of secondary datacenter `secondary`, as every server of this (primary) datacenter derives it. */
  derive(secondary: string): Buffer | undefined {
    const own = this.datacenterKey();
    return own === undefined ? undefined : createHmac('sha256', own).update(`watchword-forward-key\n${secondary}`).digest();
  }

  /** A secondary keeps the key its primary handed it. */
  hold(primary: string, key: Buffer): void {
    this.held = { primary, key };
  }

  /** The id and key to prove a request this server sends to datacenter `to` with (undefined: none to prove with). */
  signing(to: string, isPrimary: boolean): { id: string; key: Buffer } | undefined {
    if (isPrimary) {
      const key = this.derive(to);
      return key === undefined ? undefined : { id: keyID(to), key };
    }
    return this.held !== undefined && this.held.primary === to ? { id: keyID(this.datacenter), key: this.held.key } : undefined;
  }

  /** The key a proof named `id` from datacenter `from` is checked with (undefined: not one this server believes). */
  checking(id: string, from: string, isPrimary: boolean): Buffer | undefined {
    if (isPrimary) return id === keyID(from) ? this.derive(from) : undefined;
    return this.held !== undefined && this.held.primary === from && id === keyID(this.datacenter) ? this.held.key : undefined;
  }
}

const keyID = (secondary: string): string => `dc:${secondary}`;
