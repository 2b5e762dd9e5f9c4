import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/**
 * The proof a server adds to a request it forwards, so that the receiver may believe the
 * original client it names (`X-Service-Forwarded-For`): an HMAC over that client, the sender's
 * mark, the method and the time, under a key both ends hold, named by `id`:
 *
 *   X-Service-Forwarded-Proof: <id> <unix seconds> <base64url HMAC-SHA256>
 *
 * `server-key`: the datacenter's server key (a follower to its leader); `token:<AccessorID>`:
 * the secret of a token with acl:write that every datacenter holds (a secondary's replication
 * token, when it forwards to the primary or another datacenter). Without a valid proof (or,
 * with TLS, a certificate naming a server) the header is ignored: anyone at a peer's address
 * (behind the same NAT, on its host) could otherwise name any client.
 */
export const FORWARD_PROOF_HEADER = 'x-service-forwarded-proof';

/** The id of a proof under the datacenter's server key. */
export const SERVER_KEY_ID = 'server-key';

/** The id of a proof under a token's secret. */
export const tokenKeyID = (accessor: string): string => `token:${accessor}`;

/** How far a proof's time may be from the receiver's clock. */
const WINDOW_S = 300;

/** What a proof vouches for. */
export interface ForwardFields {
  /** The original client's address. */
  client: string;
  /** The sender's mark (`X-Service-Forwarded-From`'s datacenter or `X-Service-Forwarded-By-Server`'s server). */
  from: string;
  method: string;
}

const mac = (key: string | Buffer, f: ForwardFields, time: string): Buffer =>
  createHmac('sha256', key).update(['watchword-forward-v1', f.client, f.from, f.method.toUpperCase(), time].join('\n')).digest();

/** The header's value for a request forwarded with key `id`. */
export function forwardProof(id: string, key: string | Buffer, fields: ForwardFields, nowMs = Date.now()): string {
  const time = String(Math.floor(nowMs / 1000));
  return `${id} ${time} ${mac(key, fields, time).toString('base64url')}`;
}

/** Whether `value` proves `fields` under the key `keyOf` gives for its id (undefined: none, not believed). */
export function checkForwardProof(
  value: string | undefined,
  fields: ForwardFields,
  keyOf: (id: string) => string | Buffer | undefined,
  nowMs = Date.now(),
): boolean {
  if (value === undefined || value.length > 512) return false;
  const parts = value.split(' ');
  if (parts.length !== 3) return false;
  const [id, time, given] = parts as [string, string, string];
  if (!/^\d{1,12}$/.test(time) || Math.abs(Number(time) - nowMs / 1000) > WINDOW_S) return false;
  const key = keyOf(id);
  if (key === undefined) return false;
  const want = mac(key, fields, time);
  const got = Buffer.from(given, 'base64url');
  return got.length === want.length && timingSafeEqual(got, want);
}

/**
 * Whether a forwarded request's sender proves to be a server (a certificate naming one, or the
 * proof header): `from` is its mark, `byServer` whether it is a server of this datacenter.
 */
export type ForwarderCheck = (req: IncomingMessage, claim: { from: string; byServer: boolean }, fields: ForwardFields) => boolean;
