import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Authorizer } from '../../src/client/authorizer.js';
import { type TestDaemon, apiFor, secondaryConfig, startTestDaemon, waitFor } from '../helpers/test-daemon.js';
import { WATCH_PATH, rawWatch, watchGauges } from '../helpers/watch.js';

interface Token {
  AccessorID: string;
  SecretID: string;
  LastUsedTime?: string;
}

const WATCH = WATCH_PATH;

describe('an enforcing client keeps its tokens current over one watch', () => {
  let d: TestDaemon;
  const made: Authorizer[] = [];
  beforeAll(async () => {
    d = await startTestDaemon({ config: { last_used_flush: '100ms' } });
  });
  afterEach(() => {
    for (const a of made.splice(0)) a.close();
  });
  afterAll(() => d.close());

  const policy = async (rules: string) =>
    (await d.api('PUT', '/v1/acl/policy', { body: { Name: `p-${randomUUID().slice(0, 8)}`, Rules: rules } })).body as {
      ID: string;
      Name: string;
    };

  it('holds 300 tokens on one connection, and sees a policy change on all of them without a read', async () => {
    const p = await policy('service "web" { policy = "read" }');
    const tokens: Token[] = [];
    for (let i = 0; i < 300; i += 50)
      tokens.push(
        ...(await Promise.all(
          Array.from(
            { length: 50 },
            async () => (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: p.ID }] } })).body as Token,
          ),
        )),
      );
    const authz = new Authorizer({ client: { address: d.url }, token: d.management });
    made.push(authz);
    for (const t of tokens) expect(await authz.allowed(t.SecretID, 'service', 'web', 'write')).toBe(false);
    await waitFor(async () => (await watchGauges(d)).tokens === 300, 5_000, 20, 'every token on the watch');
    expect((await watchGauges(d)).watches).toBe(1);
    const reads = authz.stats().misses;
    expect(
      (await d.api('PUT', `/v1/acl/policy/${p.ID}`, { body: { Name: p.Name, Rules: 'service "web" { policy = "write" }' } })).status,
    ).toBe(200);
    await waitFor(() => tokens.every((t) => authz.allowed(t.SecretID, 'service', 'web', 'write') === true), 5_000, 5, 'the new rules');
    expect(authz.stats().misses).toBe(reads);
    expect(authz.stats().refreshes).toBeGreaterThanOrEqual(300);
    authz.close();
    await waitFor(async () => (await watchGauges(d)).watches === 0, 5_000, 20, 'the watch closed');
    expect((await watchGauges(d)).tokens).toBe(0);
  });

  it('sees a role given another policy, and a token given another role', async () => {
    const read = await policy('key_prefix "" { policy = "read" }');
    const write = await policy('service "api" { policy = "write" }');
    const role = (await d.api('PUT', '/v1/acl/role', { body: { Name: `r-${randomUUID().slice(0, 8)}`, Policies: [{ ID: read.ID }] } }))
      .body as {
      ID: string;
      Name: string;
    };
    const t = (await d.api('PUT', '/v1/acl/token', { body: { Roles: [{ ID: role.ID }] } })).body as Token;
    const authz = new Authorizer({ client: { address: d.url }, token: d.management });
    made.push(authz);
    expect(await authz.allowed(t.SecretID, 'service', 'api', 'write')).toBe(false);
    await waitFor(async () => (await watchGauges(d)).tokens === 1, 5_000, 20, 'the token on the watch');
    await d.api('PUT', `/v1/acl/role/${role.ID}`, { body: { Name: role.Name, Policies: [{ ID: read.ID }, { ID: write.ID }] } });
    await waitFor(() => authz.allowed(t.SecretID, 'service', 'api', 'write') === true, 5_000, 5, 'the role change');
    // The policy the role gained is now one the token depends on: its change reaches the client too.
    await d.api('PUT', `/v1/acl/policy/${write.ID}`, { body: { Name: write.Name, Rules: 'service "api" { policy = "read" }' } });
    await waitFor(() => authz.allowed(t.SecretID, 'service', 'api', 'write') === false, 5_000, 5, 'the policy change through the role');
    expect(authz.allowed(t.SecretID, 'service', 'api', 'read')).toBe(true);
  });

  it('answers a changed hash at once, an unknown secret as gone, and counts a watched token as used', async () => {
    const t = (await d.api('PUT', '/v1/acl/token', { body: {} })).body as Token;
    expect(((await d.api('GET', `/v1/acl/token/${t.AccessorID}`)).body as Token).LastUsedTime).toBeUndefined();
    const w = await rawWatch(d.url, d.management);
    try {
      w.send({
        t: 'watch',
        seq: 1,
        add: [
          [7, t.SecretID, 'not-its-hash'],
          [8, randomUUID(), 'x'],
        ],
      });
      await waitFor(() => w.frames.some((f) => f.t === 'changes'), 5_000, 10, 'an answer');
      const answer = w.frames.find((f) => f.t === 'changes') as {
        ack: number;
        set: Array<[number, string, { AccessorID: string }]>;
        gone: number[];
      };
      expect(answer.ack).toBe(1);
      expect(answer.gone).toEqual([8]);
      expect(answer.set.map(([id, , view]) => [id, view.AccessorID])).toEqual([[7, t.AccessorID]]);
      // The secret never comes back, only the client's own numbers.
      expect(JSON.stringify(w.frames)).not.toContain(t.SecretID);
      await waitFor(() => w.frames.some((f) => f.t === 'beat' && f.ack === 1), 5_000, 10, 'a beat');
      w.send({ t: 'used', ids: [7] });
      await waitFor(
        async () => typeof ((await d.api('GET', `/v1/acl/token/${t.AccessorID}`)).body as Token).LastUsedTime === 'string',
        5_000,
        50,
        'the last use',
      );
      // A delete reaches the watch as gone.
      await d.api('DELETE', `/v1/acl/token/${t.AccessorID}`);
      await waitFor(() => w.frames.some((f) => f.t === 'changes' && (f.gone as number[]).includes(7)), 5_000, 5, 'gone');
    } finally {
      w.ws.close();
    }
  });

  it.each([
    ['text that is not JSON', '{nope', 'not JSON'],
    ['an unknown frame type', { t: 'launch' }, 'unknown frame type'],
    ['an entry that is not [id, secret, hash]', { t: 'watch', seq: 1, add: [[1, 2, 3]] }, '[id, secret, hash]'],
    ['a negative sequence number', { t: 'watch', seq: -1, add: [] }, 'seq'],
    [
      'more than 5000 additions in one frame',
      { t: 'watch', seq: 1, add: Array.from({ length: 5001 }, (_, i) => [i, 'x', 'y']) },
      'at most 5000',
    ],
    ['ids that are not numbers', { t: 'unwatch', ids: ['a'] }, 'ids'],
    ['a secret of 300 characters', { t: 'watch', seq: 1, add: [[1, 'x'.repeat(300), 'h']] }, 'secret'],
    ['the anonymous token (an empty secret)', { t: 'watch', seq: 1, add: [[1, '', 'h']] }, 'anonymous token is not watched'],
    ['a report without a client name', { t: 'report', denied: [], allowed: [], unknown: 0, dropped: 0 }, 'report:'],
    [
      'a report of more than 1000 entries',
      {
        t: 'report',
        client: 'c',
        denied: [],
        allowed: Array.from({ length: 1001 }, (_, i) => [i, 'service', 'web', 'read', 'default', 'default']),
        unknown: 0,
        dropped: 0,
      },
      'at most 1000 entries',
    ],
    [
      'a report denial without its count',
      { t: 'report', client: 'c', denied: [[1, 'service', 'web', 'read', 'default', 'default']], allowed: [], unknown: 0, dropped: 0 },
      'report:',
    ],
    [
      'a report with a segment of 5000 characters',
      {
        t: 'report',
        client: 'c',
        denied: [],
        allowed: [[1, 'key', 'k'.repeat(5000), 'read', 'default', 'default']],
        unknown: 0,
        dropped: 0,
      },
      'report:',
    ],
  ])('ends a watch that sends %s with 1008 and the reason; the daemon serves on', async (_, frame, reason) => {
    const w = await rawWatch(d.url, d.management);
    w.send(frame);
    const end = await w.ended;
    expect(end.code).toBe(1008);
    expect(end.reason).toContain(reason);
    expect((await d.api('GET', '/v1/acl/token/self')).status).toBe(200);
  });

  it('takes a report only about tokens the connection watches, at most every half second (the rest counted)', async () => {
    const t = (await d.api('PUT', '/v1/acl/token', { body: {} })).body as Token;
    const w = await rawWatch(d.url, d.management);
    try {
      w.send({ t: 'watch', seq: 1, add: [[3, t.SecretID, '']] });
      await waitFor(() => w.frames.some((f) => f.t === 'changes'), 5_000, 10, 'an answer');
      const denial = (id: number, segment: string) => [id, 'service', segment, 'write', 'default', 'default', 2];
      // Id 4 is not watched here: it names no token, and is left out.
      w.send({ t: 'report', client: 'raw-client', denied: [denial(3, 'db'), denial(4, 'other')], allowed: [], unknown: 1, dropped: 0 });
      // Too soon after the first: passed over, counted in the next.
      w.send({ t: 'report', client: 'raw-client', denied: [denial(3, 'api')], allowed: [], unknown: 0, dropped: 0 });
      await new Promise((r) => setTimeout(r, 600));
      w.send({ t: 'report', client: 'raw-client', denied: [denial(3, 'cache')], allowed: [], unknown: 0, dropped: 0 });
      type Line = {
        Client: string;
        Denials: Array<{ AccessorID: string; Segment: string; Count: number }>;
        Dropped?: number;
        UnknownSecrets?: number;
      };
      let lines: Line[] = [];
      await waitFor(
        async () => {
          const events = (await d.api('GET', '/v1/operator/audit?type=denied-by-client')).body.Events as unknown as Line[];
          lines = events.filter((e) => e.Client === 'raw-client').reverse();
          return lines.length >= 2;
        },
        5_000,
        50,
        'two report lines',
      );
      expect(lines.map((l) => l.Denials.map((x) => [x.AccessorID, x.Segment, x.Count]))).toEqual([
        [[t.AccessorID, 'db', 2]],
        [[t.AccessorID, 'cache', 2]],
      ]);
      expect(lines[0]?.UnknownSecrets).toBe(1);
      expect(lines[1]?.Dropped).toBe(1);
      expect(JSON.stringify(lines)).not.toContain(t.SecretID);
    } finally {
      w.ws.close();
    }
  });

  it('ends a watch that sends a binary frame; refuses a watch opened with another method', async () => {
    const w = await rawWatch(d.url, d.management);
    w.ws.send(Buffer.from([1, 2, 3]));
    expect((await w.ended).code).toBe(1003);
    const res = await fetch(`${d.url}${WATCH}`, { method: 'POST', headers: { Connection: 'Upgrade', Upgrade: 'websocket' } }).catch(
      (err: Error) => err,
    );
    // Either the refusal's status or a closed connection: never a watch.
    if (!(res instanceof Error)) expect(res.status).not.toBe(101);
    expect((await d.api('GET', '/v1/acl/token/self')).status).toBe(200);
  });
});

describe('a watch at a secondary', () => {
  it('sees a global token deleted at the primary, and a Local token deleted where it lives', async () => {
    const fast = { heartbeatMs: 100 };
    const dc1 = await startTestDaemon({ replication: fast });
    const dc2 = await startTestDaemon({ config: secondaryConfig(dc1), replication: fast });
    const authz = new Authorizer({ client: { address: dc2.url }, token: dc1.management });
    try {
      const global = (await dc1.api('PUT', '/v1/acl/token', { body: { Policies: [{ Name: 'global-management' }] } })).body as Token;
      await waitFor(() => dc2.daemon.store.reader.getToken(global.AccessorID) !== undefined, 10_000, 20, 'the token in dc2');
      const local = (
        await dc2.api('PUT', '/v1/acl/token', { token: dc1.management, body: { Local: true, Policies: [{ Name: 'global-management' }] } })
      ).body as Token;
      expect(await authz.allowed(global.SecretID, 'acl', '', 'write')).toBe(true);
      expect(await authz.allowed(local.SecretID, 'acl', '', 'write')).toBe(true);
      const reads = authz.stats().misses;
      await waitFor(() => authz.stats().cached === 2, 2_000);
      await dc1.api('DELETE', `/v1/acl/token/${global.AccessorID}`);
      await waitFor(() => authz.allowed(global.SecretID, 'acl', '', 'write') === false, 10_000, 5, 'the global delete');
      await apiFor(dc2.url, dc1.management)('DELETE', `/v1/acl/token/${local.AccessorID}`);
      await waitFor(() => authz.allowed(local.SecretID, 'acl', '', 'write') === false, 10_000, 5, 'the Local delete');
      expect(authz.stats().misses).toBe(reads);
    } finally {
      authz.close();
      await dc2.close();
      await dc1.close();
    }
  });
});

describe('an enforcing client within a per-address connection cap', () => {
  it('caches 1,500 tokens and sees a delete on one of them through a daemon that lets an address hold 4 connections', async () => {
    const d = await startTestDaemon({ config: { http_max_conns_per_client: 4 } });
    const authz = new Authorizer({ client: { address: d.url }, token: d.management });
    try {
      // Made in process (Fastify's inject), 50 at a time: no connection of this address's 4 is taken, and they share syncs.
      const tokens: Token[] = [];
      for (let i = 0; i < 1_500; i += 50)
        tokens.push(
          ...(await Promise.all(
            Array.from({ length: 50 }, async () => {
              const res = await d.daemon.app.inject({
                method: 'PUT',
                url: '/v1/acl/token',
                headers: { 'X-Service-Token': d.management },
                payload: { Policies: [{ Name: 'global-management' }] },
              });
              return res.json() as Token;
            }),
          )),
        );
      // 500 asked about at once (past 1,000 first look-ups in flight a new secret is denied): they queue on the client's one HTTP connection.
      for (let i = 0; i < tokens.length; i += 500) {
        const answers = await Promise.all(tokens.slice(i, i + 500).map((t) => authz.allowed(t.SecretID, 'acl', '', 'write')));
        expect(answers.every((a) => a === true)).toBe(true);
      }
      await waitFor(async () => (await watchGauges(d)).tokens === 1_500, 10_000, 50, 'every token on the one watch');
      expect((await watchGauges(d)).watches).toBe(1);
      await d.api('DELETE', `/v1/acl/token/${tokens[0]?.AccessorID}`);
      await waitFor(() => authz.allowed(tokens[0]?.SecretID, 'acl', '', 'write') === false, 5_000, 5, 'the delete');
      expect(authz.allowed(tokens[1]?.SecretID, 'acl', '', 'write')).toBe(true);
      expect(authz.stats()).toMatchObject({ downAnswers: 0, failovers: 0, cached: 1_499 });
    } finally {
      authz.close();
      await d.close();
    }
  }, 60_000);
});
