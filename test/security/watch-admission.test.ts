import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type WebSocket from 'ws';
import { type TestDaemon, startTestDaemon, waitFor } from '../helpers/test-daemon.js';
import { rawWatch, watchGauges, watchUpgrade } from '../helpers/watch.js';

// The fifth security review, findings 1 and 4: the enforcing client's watch was opened with no
// credential, buffered without bound for a client that never read (re-adding one entry with a
// wrong hash answered a whole view each time), and judged any number of made-up secrets unaudited.

interface Token {
  AccessorID: string;
  SecretID: string;
}

/** A policy whose rules make a token's view large (~40 KB), so that a few answers fill a connection. */
const LARGE_RULES = Array.from({ length: 1_000 }, (_, i) => `key "app/config/${i}" { policy = "read" }`).join('\n');

const socketOf = (ws: WebSocket): Socket => (ws as unknown as { _socket: Socket })._socket;

describe('finding 1: a watch needs a token of its own with acl:read', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterAll(() => d?.close());

  it('refuses the anonymous secret, an unknown secret, and a token without acl:read; admits one with it', async () => {
    const p = (
      await d.api('PUT', '/v1/acl/policy', {
        body: { Name: `svc-${randomUUID().slice(0, 8)}`, Rules: 'service "web" { policy = "write" }' },
      })
    ).body as { ID: string };
    const weak = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: p.ID }] } })).body as Token;
    const r = (await d.api('PUT', '/v1/acl/policy', { body: { Name: `reader-${randomUUID().slice(0, 8)}`, Rules: 'acl = "read"' } }))
      .body as { ID: string };
    const reader = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: r.ID }] } })).body as Token;

    expect(await watchUpgrade(d.url, { 'X-Service-Token': 'anonymous' })).toMatchObject({ status: 403 });
    const unknown = await watchUpgrade(d.url, { 'X-Service-Token': randomUUID() });
    expect(unknown).toMatchObject({ status: 403 });
    expect(unknown.text).toContain('ACL not found');
    const lacking = await watchUpgrade(d.url, { 'X-Service-Token': weak.SecretID });
    expect(lacking.status).toBe(403);
    expect(lacking.text).toContain(`token with AccessorID '${weak.AccessorID}' lacks permission 'acl:read'`);
    const admitted = await watchUpgrade(d.url, { Authorization: `Bearer ${reader.SecretID}` });
    expect(admitted.status).toBe(101);
    admitted.ws?.close();
    // Every refusal is audited, the unknown secret by its HMAC (never the secret).
    const refused = (await d.api('GET', '/v1/operator/audit?type=refused')).body.Events;
    const atWatch = refused.filter((e) => e.Path === '/v1/internal/acl/authorizer/watch');
    expect(atWatch.some((e) => e.AccessorID === weak.AccessorID)).toBe(true);
    expect(atWatch.some((e) => e.AccessorID.startsWith('hmac:'))).toBe(true);
  });

  it('refuses 200 watches from one address without a token, each with 403 saying what it needs', async () => {
    const answers = await Promise.all(Array.from({ length: 200 }, () => watchUpgrade(d.url)));
    for (const a of answers) a.ws?.terminate();
    expect(answers.filter((a) => a.status === 101).length).toBe(0);
    expect(new Set(answers.map((a) => a.status))).toEqual(new Set([403]));
    expect(answers[0]?.text).toMatch(/a watch is opened with a token of the client's own that has acl:read/);
    expect((await watchGauges(d)).watches).toBe(0);
  });

  it('ends a watch whose own token is deleted, at once', async () => {
    const r = (await d.api('PUT', '/v1/acl/policy', { body: { Name: `reader-${randomUUID().slice(0, 8)}`, Rules: 'acl = "read"' } }))
      .body as { ID: string };
    const reader = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: r.ID }] } })).body as Token;
    const w = await rawWatch(d.url, reader.SecretID);
    await d.api('DELETE', `/v1/acl/token/${reader.AccessorID}`);
    const end = await w.ended;
    expect(end.code).toBe(1008);
    expect(end.reason).toContain("the watch's own token no longer authenticates");
  });

  it('answers a repeated add of the same id and secret with nothing new: no view is sent twice', async () => {
    const t = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ Name: 'global-management' }] } })).body as Token;
    const w = await rawWatch(d.url, d.management);
    try {
      for (let seq = 1; seq <= 50; seq++) w.send({ t: 'watch', seq, add: [[1, t.SecretID, 'wrong-hash']] });
      await waitFor(() => w.frames.some((f) => f.t === 'changes' && f.ack === 50), 5_000, 10, 'the last add acknowledged');
      const views = w.frames.flatMap((f) => (f.t === 'changes' ? (f.set as unknown[]) : []));
      expect(views.length).toBe(1);
    } finally {
      w.ws.close();
    }
  });
});

describe('finding 1: 200 credentialed watches that never read', () => {
  let d: TestDaemon;
  const opened: WebSocket[] = [];
  beforeAll(async () => {
    d = await startTestDaemon({ config: { http_max_conns_per_client: 0 } });
  });
  afterAll(async () => {
    for (const ws of opened) ws.terminate();
    await d?.close();
  });

  it('hold at most the per-connection bound each; past the daemon-wide bound the largest are closed first', async () => {
    const p = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'large', Rules: LARGE_RULES } })).body as { ID: string };
    const a = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: p.ID }] } })).body as Token;
    const b = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: p.ID }, { Name: 'global-management' }] } })).body as Token;
    const rssBefore = process.memoryUsage().rss;
    for (let c = 0; c < 200; c++) {
      const w = await rawWatch(d.url, d.management);
      opened.push(w.ws);
      // This client reads nothing from now on.
      socketOf(w.ws).pause();
      // Each frame re-adds 100 ids with the other secret: 100 views of ~40 KB owed each time (~4 MB a frame).
      for (let seq = 1; seq <= 4; seq++)
        w.send({ t: 'watch', seq, add: Array.from({ length: 100 }, (_, i) => [i, seq % 2 === 0 ? a.SecretID : b.SecretID, 'x']) });
    }
    // Until what the server holds settles (it stops making answers for clients that do not read).
    let last = -1;
    await waitFor(
      async () => {
        const g = await watchGauges(d);
        const settled = g.queued === last;
        last = g.queued;
        return settled;
      },
      30_000,
      500,
      'the queued bytes to settle',
    );
    const g = await watchGauges(d);
    const rssGrowth = process.memoryUsage().rss - rssBefore;
    process.stdout.write(
      `200 watches that never read: ${g.watches} open, ${g.closedForBounds} closed for the bound, ` +
        `queued ${(g.queued / 2 ** 20).toFixed(1)} MiB (largest ${(g.queuedMax / 2 ** 20).toFixed(2)} MiB), ` +
        `RSS +${(rssGrowth / 2 ** 20).toFixed(0)} MiB\n`,
    );
    // The per-connection bound (1 MiB), give or take one frame of views.
    expect(g.queuedMax).toBeLessThanOrEqual(1.25 * 2 ** 20);
    // The daemon-wide bound (64 MiB): past it, watches were closed.
    expect(g.queued).toBeLessThanOrEqual(64 * 2 ** 20);
    expect(g.closedForBounds).toBeGreaterThan(0);
    expect(g.watches + g.closedForBounds).toBe(200);
    // The daemon serves on.
    expect((await d.api('GET', '/v1/acl/token/self')).status).toBe(200);
  }, 120_000);
});

describe('finding 4: the watch is no oracle for guessed secrets', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterAll(() => d?.close());

  it('closes a watch past a handful of secrets no token holds, each audited by its HMAC and spent from the address', async () => {
    const w = await rawWatch(d.url, d.management);
    const guesses = Array.from({ length: 1_000 }, () => randomUUID());
    w.send({ t: 'watch', seq: 1, add: guesses.map((g, i) => [i, g, '']) });
    const end = await w.ended;
    expect(end.code).toBe(1008);
    expect(end.reason).toMatch(/secrets no token holds|too many unknown secrets/);
    // At most a handful were answered before it closed.
    const answered = w.frames.flatMap((f) => (f.t === 'changes' ? (f.gone as number[]) : []));
    expect(answered.length).toBeLessThanOrEqual(16);
    await waitFor(
      async () => {
        const events = (await d.api('GET', '/v1/operator/audit?type=refused')).body.Events;
        return events.some((e) => e.Path === '/v1/internal/acl/authorizer/watch' && e.AccessorID.startsWith('hmac:'));
      },
      5_000,
      50,
      'the refusals audited',
    );
    const text = JSON.stringify((await d.api('GET', '/v1/operator/audit?type=refused')).body);
    for (const g of guesses.slice(0, 20)) expect(text).not.toContain(g);
  });

  it('spends the same budget as a request header does: past it, the address is refused 429 at the API too', async () => {
    const d2 = await startTestDaemon({ config: { unknown_secret_rate: 1 } });
    try {
      // Five seconds' worth (the burst) spent on watch entries, over several watches.
      for (let i = 0; i < 2; i++) {
        const w = await rawWatch(d2.url, d2.management);
        w.send({ t: 'watch', seq: 1, add: Array.from({ length: 10 }, (_, k) => [k, randomUUID(), '']) });
        await w.ended;
      }
      const res = await d2.api('GET', '/v1/acl/token/self', { token: randomUUID() });
      expect(res.status).toBe(429);
      expect(res.text).toContain('Too many unknown secrets');
      // A real token is never refused for it.
      expect((await d2.api('GET', '/v1/acl/token/self')).status).toBe(200);
    } finally {
      await d2.close();
    }
  });
});
