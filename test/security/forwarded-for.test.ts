import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WatchwordClient } from '../../src/client/index.js';
import { bodyHashOf, forwardProof } from '../../src/transport/forward-proof.js';
import { type TestDaemon, startTestDaemon, waitFor, secondaryConfig } from '../helpers/test-daemon.js';

/**
 * Fourth security review, finding 5: X-Service-Forwarded-For was believed from any connection
 * at a peer's IP, so a client on a secondary's host (or behind its NAT) bypassed the login limit
 * and wrote any RemoteAddr into the primary's audit log (60 logins, 0 × 429, 60 forged
 * addresses). It is now believed only with proof: a certificate naming a server, or an HMAC
 * over it under a key only servers hold (forward-proof-keys.test.ts).
 */
describe('forwarded-client headers from a client on a secondary host', () => {
  let dc1: TestDaemon;
  let dc2: TestDaemon;
  beforeAll(async () => {
    dc1 = await startTestDaemon();
    // dc2 is on this host (127.0.0.1): every request below comes from a secondary's address.
    dc2 = await startTestDaemon({
      config: secondaryConfig(dc1),
    });
    await waitFor(async () => (await new WatchwordClient({ address: dc2.url }).replication()).Connected, 10_000);
    await waitFor(() => dc2.daemon.store.reader.getTokenBySecret(dc1.management) !== undefined, 10_000);
  });
  afterAll(async () => {
    await dc2?.close();
    await dc1?.close();
  });

  const login = (forged: Record<string, string>) =>
    fetch(`${dc1.url}/v1/acl/login`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json', ...forged },
      body: JSON.stringify({ AuthMethod: 'none', BearerToken: 'x' }),
    });

  it('counts 60 logins with forged addresses against the sender: past the burst, 429', async () => {
    const statuses: number[] = [];
    const started = Date.now();
    for (let i = 0; i < 60; i++) {
      const res = await login({
        'X-Service-Forwarded-From': 'dc2',
        'X-Service-Forwarded-For': `203.0.113.${i}`,
        // A proof made up, or one made with a key the sender does not hold, proves nothing.
        'X-Service-Forwarded-Proof':
          i % 2
            ? 'server-key 1 AAAA'
            : forwardProof('dc:dc2', 'guess', {
                client: `203.0.113.${i}`,
                from: 'dc2',
                method: 'POST',
                path: '/v1/acl/login',
                bodyHash: bodyHashOf(JSON.stringify({ AuthMethod: 'none', BearerToken: 'x' })),
              }),
      });
      await res.arrayBuffer();
      statuses.push(res.status);
    }
    // The login limit's burst (20) and what refilled at 10 a second while they were sent, then 429s: one client, whatever
    // it claims (were the forged addresses believed, none would be refused).
    const admitted = 20 + Math.ceil((10 * (Date.now() - started)) / 1000) + 1;
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(60 - admitted);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThan(0);
  });

  it('writes the real address into the audit log, never a forged one', async () => {
    const path = join(dc1.dataDir, 'audit', 'audit.log');
    await waitFor(async () => (await readFile(path, 'utf8')).includes('"Status":429'), 5_000);
    const lines = (await readFile(path, 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { Type: string; RemoteAddr: string; Path: string });
    const logins = lines.filter((e) => e.Type === 'refused' && e.Path === '/v1/acl/login');
    expect(logins.length).toBeGreaterThan(0);
    expect(logins.filter((e) => e.RemoteAddr.startsWith('203.0.113.'))).toEqual([]);
    expect(new Set(logins.map((e) => e.RemoteAddr))).toEqual(new Set(['127.0.0.1']));
  });
  // The secondary's own, signed forwards are still believed: test/http/audit-enforced.test.ts (a client at
  // 127.0.0.2 audited at the primary) and test/security/peer-rate-limits.test.ts (each client limited on its own).
});
