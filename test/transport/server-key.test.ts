import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { PROOF_HEADERS, ServerKeyProof } from '../../src/transport/server-key.js';

// The servers' challenge-response over the shared server key, both directions, without sockets.

const key = randomBytes(32);
const leader = { name: 'dc1-server-1', address: '127.0.0.1:8501' };

describe('ServerKeyProof', () => {
  it('a follower holding the key proves itself to the leader it meant, and the leader proves itself back', () => {
    const follower = new ServerKeyProof(key, 'dc1');
    const atLeader = new ServerKeyProof(key, 'dc1');
    const { headers, nonce } = follower.request('dc1-server-2', leader);
    const proved = atLeader.verifyRequest(headers, leader);
    expect(proved).toEqual({ ok: true, name: 'dc1-server-2', nonce });
    if (!proved.ok) return;
    expect(follower.verifyResponse(nonce, atLeader.response(proved.nonce, leader.name))).toEqual({ ok: true, name: leader.name });
  });

  it.each([
    ['another key', () => new ServerKeyProof(randomBytes(32), 'dc1').request('dc1-server-2', leader).headers, /server proof is wrong/],
    [
      "the key of another datacenter's name",
      () => new ServerKeyProof(key, 'dc2').request('dc1-server-2', leader).headers,
      /server proof is wrong/,
    ],
    [
      'a proof made for another server (relayed by an impostor)',
      () => new ServerKeyProof(key, 'dc1').request('dc1-server-2', { name: 'impostor', address: '10.0.0.9:8500' }).headers,
      /made its proof for another server/,
    ],
    [
      'a proof more than a minute old',
      () => new ServerKeyProof(key, 'dc1').request('dc1-server-2', leader, Date.now() - 61_000).headers,
      /too old/,
    ],
    ['no proof', () => ({ [PROOF_HEADERS.name]: 'dc1-server-2' }), /no server proof/],
    [
      'a renamed sender',
      () => ({ ...new ServerKeyProof(key, 'dc1').request('dc1-server-2', leader).headers, [PROOF_HEADERS.name]: 'dc1-server-3' }),
      /server proof is wrong/,
    ],
  ])('the leader refuses %s', (_what, headers, reason) => {
    const r = new ServerKeyProof(key, 'dc1').verifyRequest(headers(), leader);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toMatch(reason);
  });

  it('the leader refuses a proof used before (a replay)', () => {
    const atLeader = new ServerKeyProof(key, 'dc1');
    const { headers } = new ServerKeyProof(key, 'dc1').request('dc1-server-2', leader);
    expect(atLeader.verifyRequest(headers, leader).ok).toBe(true);
    expect(atLeader.verifyRequest(headers, leader)).toEqual({ ok: false, reason: 'the server proof was used before' });
  });

  it("the follower refuses a leader that cannot answer its nonce, and a follower's own proof reflected back", () => {
    const follower = new ServerKeyProof(key, 'dc1');
    const { nonce, headers } = follower.request('dc1-server-2', leader);
    expect(follower.verifyResponse(nonce, {}).ok).toBe(false);
    expect(follower.verifyResponse(nonce, new ServerKeyProof(randomBytes(32), 'dc1').response(nonce, leader.name)).ok).toBe(false);
    expect(
      follower.verifyResponse(nonce, { [PROOF_HEADERS.name]: leader.name, [PROOF_HEADERS.proof]: headers[PROOF_HEADERS.proof] }).ok,
    ).toBe(false);
  });
});
