import type { Arrival } from '../replication/secondary-stream.js';
import type { ForwardFields, ForwarderCheck } from '../transport/forward-proof.js';
import type { PeerClient } from '../transport/peer-client.js';

// What a server's place in the cluster offers the HTTP layer (the role implements these;
// http/forward.ts uses them to send a request where it must go).

/** What the HTTP layer needs of a daemon's place in the cluster. */
export interface ClusterHooks {
  datacenter: string;
  /** Address of a datacenter's daemon, when known. */
  addressOf(datacenter: string): string | undefined;
  peer(datacenter: string, address: string): PeerClient;
  /** Whether a forwarded request comes from a server that proves it (then its X-Service-Forwarded-For is believed). */
  forwarderCheck: ForwarderCheck;
  /**
   * The proof header's value for a request this server forwards naming `fields`, to a server of
   * its own datacenter (`byServer`) or of `datacenter` (undefined: it holds no key to prove with).
   */
  forwardProof(fields: ForwardFields, to: { byServer: boolean; datacenter: string }): string | undefined;
  /** Set on secondaries only. */
  secondary?: SecondaryHooks;
  /** HA: set while this server is a follower of its datacenter's leader (writes go there). */
  follower?: () => FollowerHooks | undefined;
}

/** What became of a forwarded write, as this server waits to hold its index (replication/secondary-stream.ts). */
export type { Arrival };

/** Taken as a write is sent on (it notes the stream the answer must come over): how its index arrives here. */
export type Sending = () => (index: number, timeoutMs: number) => Promise<Arrival>;

export interface FollowerHooks {
  leader: PeerClient;
  sending: Sending;
}

export interface SecondaryHooks {
  primary: PeerClient;
  /** Whether a Local token with this accessor lives here. */
  isLocalToken(accessorID: string): Promise<boolean>;
  waitForApplied(index: number, timeoutMs: number): Promise<boolean>;
  /** A global write sent to the primary: how the index it answers arrives here. */
  sending: Sending;
  /** This datacenter's view of an object the primary just wrote, after it replicated. */
  localView(kind: 'token' | 'policy' | 'role', id: string): Promise<unknown | undefined>;
  currentIndex(): number;
  /** The highest primary epoch this datacenter has seen (its replication cursor's): sent with each forwarded write. */
  epochSeen(): number;
}
