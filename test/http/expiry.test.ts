import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { ManualClock } from '../../src/domain/clock.js';
import { newTokenRecord } from '../../src/domain/token.js';
import { Reaper } from '../../src/reaper/reaper.js';
import { tokenRecord } from '../helpers/records.js';
import { type TestDaemon, apiFor, secondaryConfig, startTestDaemon, waitFor } from '../helpers/test-daemon.js';

describe('token expiry and reaping', () => {
  let clock: ManualClock;
  let d: TestDaemon;

  beforeEach(async () => {
    clock = new ManualClock(Date.UTC(2030, 0, 1, 12));
    d = await startTestDaemon({ clock, config: { reap_interval: '100ms' } });
  });
  afterEach(() => d.close());

  it("keeps no token's compiled rules once the token is reaped or deleted, and none of any once a policy changes", async () => {
    const cached = async () => {
      const text = (await d.api('GET', '/v1/agent/metrics?format=prometheus')).text;
      return Number(/^watchword_acl_authorizers_cached (\d+)$/m.exec(text)?.[1]);
    };
    const rw = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'rw', Rules: 'acl = "read"' } })).body;
    const made: Array<{ AccessorID: string; SecretID: string }> = [];
    for (let i = 0; i < 20; i++) {
      const ttl = i < 10 ? { ExpirationTTL: '10m' } : {};
      made.push((await d.api('PUT', '/v1/acl/token', { body: { Description: `used ${i}`, Policies: [{ ID: rw.ID }], ...ttl } })).body);
    }
    // Each used: its rules compiled and kept for the next request.
    for (const t of made) expect((await apiFor(d.url, t.SecretID)('GET', '/v1/acl/tokens')).status).toBe(200);
    const held = await cached();
    expect(held).toBeGreaterThanOrEqual(20);
    // Ten expire and are reaped, five are deleted: theirs go with them.
    clock.advance(10 * 60_000);
    await waitFor(async () => (await d.daemon.store.reader.getToken((made[0] as { AccessorID: string }).AccessorID)) === undefined, 5_000);
    for (const t of made.slice(10, 15)) expect((await d.api('DELETE', `/v1/acl/token/${t.AccessorID}`)).status).toBe(200);
    expect(await cached()).toBe(held - 15);
    // A policy changed: every compiled authorizer may be stale, and none is kept (but the one
    // the scrape itself compiled for its management token).
    expect((await d.api('PUT', `/v1/acl/policy/${rw.ID}`, { body: { Name: 'rw', Rules: 'acl = "write"' } })).status).toBe(200);
    expect(await cached()).toBe(1);
    // The survivors still work, compiled again with the new rules.
    expect(
      (await apiFor(d.url, (made[19] as { SecretID: string }).SecretID)('PUT', '/v1/acl/policy', { body: { Name: 'by-survivor' } })).status,
    ).toBe(200);
  });

  it('hides a token from read, list and auth the moment it expires, then the reaper deletes it', async () => {
    const rw = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'rw', Rules: 'acl = "write"' } })).body;
    const short = (await d.api('PUT', '/v1/acl/token', { body: { Description: 'short', ExpirationTTL: '10m', Policies: [{ ID: rw.ID }] } }))
      .body;
    const long = (await d.api('PUT', '/v1/acl/token', { body: { Description: 'long', ExpirationTTL: '2h' } })).body;
    const forever = (await d.api('PUT', '/v1/acl/token', { body: { Description: 'forever' } })).body;
    expect(short.ExpirationTime).toBe('2030-01-01T12:10:00.000Z');

    // One millisecond before: still there.
    clock.advance(10 * 60_000 - 1);
    expect((await d.api('GET', `/v1/acl/token/${short.AccessorID}`)).status).toBe(200);
    expect((await apiFor(d.url, short.SecretID)('GET', '/v1/acl/tokens')).status).toBe(200);

    // At the expiration time: gone everywhere, although still stored.
    clock.advance(1);
    expect(await d.daemon.store.reader.getToken(short.AccessorID)).toBeDefined();
    const read = await d.api('GET', `/v1/acl/token/${short.AccessorID}`);
    expect(read.status).toBe(404);
    const list = (await d.api('GET', '/v1/acl/tokens')).body as Array<{ AccessorID: string }>;
    expect(list.map((t) => t.AccessorID)).not.toContain(short.AccessorID);
    expect(list.map((t) => t.AccessorID)).toEqual(expect.arrayContaining([long.AccessorID, forever.AccessorID]));
    const auth = await apiFor(d.url, short.SecretID)('GET', '/v1/acl/token/self');
    expect(auth.status).toBe(403);
    expect(auth.body.code).toBe('ACL_NOT_FOUND');
    // Writes on it did nothing: 400 (Consul's clients raise on it), with Consul's message.
    const update = await d.api('PUT', `/v1/acl/token/${short.AccessorID}`, { body: {} });
    expect([update.status, update.body.message]).toEqual([400, `Cannot find token "${short.AccessorID}"`]);
    expect((await d.api('PUT', `/v1/acl/token/${short.AccessorID}/clone`, { body: {} })).status).toBe(400);
    expect((await d.api('GET', `/v1/acl/tokens?policy=${rw.ID}`)).body).toEqual([]);

    // The reaper removes it within 2 s; the others stay.
    await waitFor(async () => (await d.daemon.store.reader.getToken(short.AccessorID)) === undefined, 2000);
    expect(await d.daemon.store.reader.getToken(long.AccessorID)).toBeDefined();
    expect(await d.daemon.store.reader.getToken(forever.AccessorID)).toBeDefined();
    expect(await d.daemon.store.reader.getTokenBySecret(short.SecretID)).toBeUndefined();
  });

  it('still deletes an expired token on request (true), before the reaper does', async () => {
    await d.daemon.reaper.stop();
    const t = (await d.api('PUT', '/v1/acl/token', { body: { ExpirationTTL: '1m' } })).body;
    clock.advance(61_000);
    const res = await d.api('DELETE', `/v1/acl/token/${t.AccessorID}`);
    expect(res.text).toBe('true');
  });

  it('refuses to clone a token that expires within the minimum TTL', async () => {
    const t = (await d.api('PUT', '/v1/acl/token', { body: { ExpirationTTL: '2m' } })).body;
    clock.advance(90_000);
    const res = await d.api('PUT', `/v1/acl/token/${t.AccessorID}/clone`, { body: {} });
    expect(res.status).toBe(400);
    expect(res.body.message).toContain('ExpirationTime cannot be less than 1m0s in the future (was 30s)');
  });

  it('reaps in batches, in expiry order, only what has expired', async () => {
    await d.daemon.reaper.stop();
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) {
      ids.push((await d.api('PUT', '/v1/acl/token', { body: { ExpirationTTL: `${2 + (i % 3)}m` } })).body.AccessorID);
    }
    clock.advance(3 * 60_000); // the 2m and 3m ones have expired, the 4m ones have not
    const passes: number[] = [];
    const small = new Reaper(d.daemon.store, clock, {
      interval: 1000,
      isPrimary: () => true,
      batchSize: 7,
      onReaped: (n) => passes.push(n),
    });
    const commitsBefore = d.daemon.store.currentIndex();
    expect(await small.reapOnce()).toBe(20);
    expect(passes).toEqual([20]);
    // 20 deletions in batches of at most 7: three transactions, three indexes.
    expect(d.daemon.store.currentIndex() - commitsBefore).toBe(3);
    const left = (await d.api('GET', '/v1/acl/tokens')).body.map((t: { AccessorID: string }) => t.AccessorID);
    expect(ids.filter((id) => left.includes(id))).toHaveLength(10);
  });

  it('asks the disk to compact once 5,000 tokens are deleted since it last did, by any path, over passes', async () => {
    await d.daemon.reaper.stop();
    const made = async (n: number, ttl: number) =>
      d.daemon.store.transact((tx) => {
        const ids: string[] = [];
        for (let i = 0; i < n; i++) {
          const t = tokenRecord({ ExpirationTime: new Date(clock.now() + ttl).toISOString() });
          tx.put('tokens', t);
          ids.push(t.AccessorID);
        }
        return ids;
      });
    await made(2_000, 60_000);
    await made(2_000, 120_000);
    const deleted = await made(1_000, 3_600_000);
    let compactions = 0;
    const reaper = new Reaper(d.daemon.store, clock, { interval: 1000, isPrimary: () => true, compact: async () => void compactions++ });
    clock.advance(61_000);
    expect(await reaper.pass()).toBe(2_000);
    expect(compactions).toBe(0);
    // Deleted, not reaped: a logout's or a delete's tombstone counts as a reap's does.
    await d.daemon.store.transact((tx) => {
      for (const id of deleted) tx.del('tokens', id);
    });
    expect(await reaper.pass()).toBe(0);
    expect(compactions).toBe(0);
    clock.advance(60_000);
    expect(await reaper.pass()).toBe(2_000);
    expect(compactions).toBe(1);
    expect(await reaper.pass()).toBe(0);
    expect(compactions).toBe(1);
  });

  it('paces itself while requests are served: small batches, the event loop free between them', async () => {
    await d.daemon.reaper.stop();
    const now = clock.now();
    await d.daemon.store.transact((tx) => {
      for (let i = 0; i < 3000; i++)
        tx.put(
          'tokens',
          newTokenRecord({
            AccessorID: randomUUID(),
            SecretID: randomUUID(),
            content: {
              Description: `t${i}`,
              Policies: [],
              Roles: [],
              ServiceIdentities: [],
              NodeIdentities: [],
              TemplatedPolicies: [],
              Local: true,
            },
            given: {},
            expires: now + 60_000,
            now,
            scope: { Namespace: 'default', Partition: 'default' },
          }),
        );
    });
    clock.advance(61_000);
    const before = d.daemon.store.currentIndex();
    let rests = 0;
    const paced = new Reaper(d.daemon.store, clock, {
      interval: 1000,
      isPrimary: () => true,
      busy: () => {
        rests++;
        return true;
      },
    });
    const reaping = paced.reapOnce();
    let done = false;
    void reaping.then(() => (done = true));
    // A request sent meanwhile is answered before the reaper is through.
    expect((await d.api('GET', '/v1/status/leader')).status).toBe(200);
    expect(done).toBe(false);
    expect(await reaping).toBe(3000);
    // Several batches, each bounded, with a rest between them.
    expect(d.daemon.store.currentIndex() - before).toBeGreaterThan(2);
    expect(rests).toBeGreaterThan(1);
  });
});

describe('reaped global tokens at a secondary', () => {
  let dc1: TestDaemon;
  let dc2: TestDaemon;
  afterEach(async () => {
    await dc2?.close();
    await dc1?.close();
  });

  it('are deleted there by one `expire` change per batch, not one entry per token; Local tokens and live ones stay', async () => {
    const fast = { token_min_ttl: '1s', reap_interval: '100ms' };
    dc1 = await startTestDaemon({ config: fast });
    dc2 = await startTestDaemon({ config: secondaryConfig(dc1, fast) });
    const from = dc1.daemon.store.currentIndex();
    const expiring: string[] = [];
    for (let i = 0; i < 40; i++) expiring.push((await dc1.api('PUT', '/v1/acl/token', { body: { ExpirationTTL: '1s' } })).body.AccessorID);
    const staying = (await dc1.api('PUT', '/v1/acl/token', { body: {} })).body.AccessorID as string;
    await waitFor(() => dc2.daemon.store.reader.getToken(staying) !== undefined, 10_000, 20, 'replicated');
    const local = (await dc2.api('PUT', '/v1/acl/token', { token: dc1.management, body: { Local: true } })).body.AccessorID as string;
    await waitFor(() => expiring.every((id) => dc1.daemon.store.reader.getToken(id) === undefined), 10_000, 50, 'reaped at dc1');
    await waitFor(() => expiring.every((id) => dc2.daemon.store.reader.getToken(id) === undefined), 10_000, 50, 'gone at dc2');
    expect(dc2.daemon.store.reader.getToken(staying)).toBeDefined();
    expect(dc2.daemon.store.reader.getToken(local)).toBeDefined();
    const changes = (await dc1.daemon.store.logEntriesAfter(from, 10_000)).flatMap((e) => e.Changes);
    expect(changes.filter((c) => c.Op === 'delete')).toEqual([]);
    expect(changes.filter((c) => c.Op === 'expire').length).toBeGreaterThan(0);
  });
});
