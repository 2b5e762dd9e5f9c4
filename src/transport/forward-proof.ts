import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/**
 * The proof a server adds to a request it forwards, so that the receiver may believe the
 * original client it names (`X-Service-Forwarded-For`): an HMAC over that client, the sender's
 * mark, the method, the path as the receiver gets it, the body's SHA-256 (declared in
 * `X-Service-Forwarded-Body`), the time and a nonce used once, under a key only servers hold,
 * named by `id`:
 *
 *   X-Service-Forwarded-Proof: <id> <unix seconds> <nonce> <base64url HMAC-SHA256>
 *
 * `server-key`: the datacenter's server key (a follower to its leader); `dc:<secondary>`: the key
 * the primary datacenter hands a secondary when its replication stream is accepted
 * (forward-keys.ts), between those two datacenters. No API token is a key: a caller holding an
 * administrator's secret cannot vouch for anyone. Without a valid proof (or, with TLS, a
 * certificate naming a server) the header is ignored, and the receiver records the socket's
 * address; when it is believed, the socket's address is recorded beside it (`ViaAddr`).
 */
export const FORWARD_PROOF_HEADER = 'x-service-forwarded-proof';

/** The SHA-256 (base64url) of the body a proof covers: checked against the body once it is read. */
export const FORWARD_BODY_HEADER = 'x-service-forwarded-body';

/** The id of a proof under the datacenter's server key. */
export const SERVER_KEY_ID = 'server-key';

/** How far a proof's time may be from the receiver's clock; a nonce is remembered this long. */
const WINDOW_S = 300;

/** What a proof vouches for. */
export interface ForwardFields {
  /** The original client's address. */
  client: string;
  /** The sender's mark (`X-Service-Forwarded-From`'s datacenter or `X-Service-Forwarded-By-Server`'s server). */
  from: string;
  method: string;
  /** The path and query the receiver is asked for. */
  path: string;
  /** The body's SHA-256 in base64url (bodyHashOf), or `stream` for a body sent as it is read. */
  bodyHash: string;
}

/** A body's hash as a proof covers it: its SHA-256 (none is the empty body), or `stream` for a streamed upload. */
export function bodyHashOf(body: string | Buffer | undefined | 'stream'): string {
  if (body === 'stream') return 'stream';
  return createHash('sha256')
    .update(body ?? '')
    .digest('base64url');
}

const mac = (key: string | Buffer, f: ForwardFields, time: string, nonce: string): Buffer =>
  createHmac('sha256', key)
    .update(['watchword-forward-v2', f.client, f.from, f.method.toUpperCase(), f.path, f.bodyHash, time, nonce].join('\n'))
    .digest();

/** The header's value for a request forwarded with key `id`. */
export function forwardProof(id: string, key: string | Buffer, fields: ForwardFields, nowMs = Date.now()): string {
  const time = String(Math.floor(nowMs / 1000));
  const nonce = randomBytes(16).toString('base64url');
  return `${id} ${time} ${nonce} ${mac(key, fields, time, nonce).toString('base64url')}`;
}

/**
 * The proof as release 0.1.0 makes and checks it: an HMAC under a token's secret over client,
 * sender, method and time (`token:<AccessorID> <unix seconds> <mac>`). A secondary sends it only
 * to a primary that handed it no forwarding key (one of 0.1.0), which believes nothing else;
 * this release never believes it. Goes with 0.1.0's support.
 */
export function previousReleaseProof(
  accessor: string,
  secret: string,
  fields: Pick<ForwardFields, 'client' | 'from' | 'method'>,
  nowMs = Date.now(),
): string {
  const time = String(Math.floor(nowMs / 1000));
  const mac = createHmac('sha256', secret)
    .update(['watchword-forward-v1', fields.client, fields.from, fields.method.toUpperCase(), time].join('\n'))
    .digest('base64url');
  return `token:${accessor} ${time} ${mac}`;
}

/**
 * Nonces of proofs already believed, until their window ends: a proof is good once. Bounded: past
 * `max` remembered, a proof is refused rather than a nonce forgotten early.
 */
export class NonceBook {
  private readonly until = new Map<string, number>();

  constructor(private readonly max = 200_000) {}

  /** Takes a nonce; false when it was seen within the window (a replay) or the book is full. */
  take(nonce: string, nowMs: number): boolean {
    if (this.until.has(nonce)) return false;
    if (this.until.size >= this.max) this.prune(nowMs);
    if (this.until.size >= this.max) return false;
    this.until.set(nonce, nowMs + 2 * WINDOW_S * 1000);
    return true;
  }

  private prune(nowMs: number): void {
    for (const [n, t] of this.until) if (t <= nowMs) this.until.delete(n);
  }
}

/** Whether `value` proves `fields` under the key `keyOf` gives for its id (undefined: none, not believed), once. */
export function checkForwardProof(
  value: string | undefined,
  fields: ForwardFields,
  keyOf: (id: string) => string | Buffer | undefined,
  nonces: NonceBook,
  nowMs = Date.now(),
): boolean {
  if (value === undefined || value.length > 512) return false;
  const parts = value.split(' ');
  if (parts.length !== 4) return false;
  const [id, time, nonce, given] = parts as [string, string, string, string];
  if (!/^\d{1,12}$/.test(time) || Math.abs(Number(time) - nowMs / 1000) > WINDOW_S) return false;
  if (!/^[A-Za-z0-9_-]{16,64}$/.test(nonce)) return false;
  const key = keyOf(id);
  if (key === undefined) return false;
  const want = mac(key, fields, time, nonce);
  const got = Buffer.from(given, 'base64url');
  return got.length === want.length && timingSafeEqual(got, want) && nonces.take(nonce, nowMs);
}

/**
 * Whether a forwarded request's sender proves to be a server (a certificate naming one, or the
 * proof header): `from` is its mark, `byServer` whether it is a server of this datacenter.
 */
export type ForwarderCheck = (req: IncomingMessage, claim: { from: string; byServer: boolean }, fields: ForwardFields) => boolean;
