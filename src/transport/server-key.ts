import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

/**
 * How the servers of a datacenter prove themselves to each other without TLS (docs/tls.md, "TLS"):
 * an HMAC challenge-response over the shared `server_key`, in both directions, on every
 * connection, inside the WebSocket upgrade itself, so nothing is streamed to, or taken
 * from, a peer that has not proven it holds the key.
 *
 *   follower -> leader  upgrade request: name, nonce, time,
 *                       HMAC("follower", dc, name, nonce, time, leader name, leader address)
 *   leader -> follower  101 response:    name, HMAC("leader", dc, leader name, nonce)
 *
 * The leader refuses a request older than a minute, a nonce it has seen, or one made for
 * another server (its name and address are signed: a proof handed to an impostor cannot be
 * relayed to the real leader); the follower checks the leader's answer against the nonce
 * it chose. The roles are part of what is signed, so a proof cannot be reflected back.
 */
export const PROOF_HEADERS = {
  name: 'x-watchword-server-name',
  nonce: 'x-watchword-server-nonce',
  time: 'x-watchword-server-time',
  proof: 'x-watchword-server-proof',
} as const;

const WINDOW_MS = 60_000;

export class ServerKeyProof {
  /** Nonces seen within the window, with when they expire. */
  private readonly seen = new Map<string, number>();

  constructor(
    private readonly key: Buffer,
    private readonly datacenter: string,
  ) {}

  private mac(...parts: string[]): string {
    return createHmac('sha256', this.key)
      .update([this.datacenter, ...parts].join('\n'))
      .digest('base64');
  }

  /** A follower's request to the server `to`: the headers to send and the nonce to check the answer against. */
  request(name: string, to: { name: string; address: string }, now = Date.now()): { headers: Record<string, string>; nonce: string } {
    const nonce = randomBytes(18).toString('base64');
    const time = String(now);
    return {
      nonce,
      headers: {
        [PROOF_HEADERS.name]: name,
        [PROOF_HEADERS.nonce]: nonce,
        [PROOF_HEADERS.time]: time,
        [PROOF_HEADERS.proof]: this.mac('follower', name, nonce, time, to.name, to.address),
      },
    };
  }

  /** At the leader `self`: whether a request proves its sender holds the key and meant this server; the name it proved. */
  verifyRequest(
    headers: IncomingHttpHeaders,
    self: { name: string; address: string },
    now = Date.now(),
  ): { ok: true; name: string; nonce: string } | { ok: false; reason: string } {
    const get = (h: string) => (typeof headers[h] === 'string' ? (headers[h] as string) : '');
    const name = get(PROOF_HEADERS.name);
    const nonce = get(PROOF_HEADERS.nonce);
    const time = get(PROOF_HEADERS.time);
    const proof = get(PROOF_HEADERS.proof);
    if (!name || !nonce || !time || !proof)
      return { ok: false, reason: 'no server proof: the servers of a datacenter prove themselves with the shared server key' };
    const at = Number(time);
    if (!Number.isFinite(at) || Math.abs(now - at) > WINDOW_MS)
      return { ok: false, reason: 'the server proof is too old (or the clocks differ by more than a minute)' };
    if (!equal(proof, this.mac('follower', name, nonce, time, self.name, self.address))) {
      return {
        ok: false,
        reason:
          `the server proof is wrong: this peer does not hold this datacenter's server key, or made its proof for another server ` +
          `than ${self.name} at ${self.address}`,
      };
    }
    this.forgetOld(now);
    if (this.seen.has(nonce)) return { ok: false, reason: 'the server proof was used before' };
    this.seen.set(nonce, now + 2 * WINDOW_MS);
    return { ok: true, name, nonce };
  }

  /** The leader's answer to a proven request. */
  response(nonce: string, leaderName: string): Record<string, string> {
    return { [PROOF_HEADERS.name]: leaderName, [PROOF_HEADERS.proof]: this.mac('leader', leaderName, nonce) };
  }

  /** At the follower: whether the leader's answer proves it holds the key. */
  verifyResponse(nonce: string, headers: IncomingHttpHeaders): { ok: true; name: string } | { ok: false; reason: string } {
    const name = typeof headers[PROOF_HEADERS.name] === 'string' ? (headers[PROOF_HEADERS.name] as string) : '';
    const proof = typeof headers[PROOF_HEADERS.proof] === 'string' ? (headers[PROOF_HEADERS.proof] as string) : '';
    if (!name || !proof) return { ok: false, reason: 'the leader sent no server proof' };
    if (!equal(proof, this.mac('leader', name, nonce)))
      return { ok: false, reason: "the leader's server proof is wrong: it does not hold this datacenter's server key" };
    return { ok: true, name };
  }

  private forgetOld(now: number): void {
    if (this.seen.size < 1024) return;
    for (const [n, until] of this.seen) if (until < now) this.seen.delete(n);
  }
}

function equal(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
