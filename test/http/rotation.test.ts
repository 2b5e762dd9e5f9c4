import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/domain/clock.js';
import { type TestDaemon, apiFor, startTestDaemon } from '../helpers/test-daemon.js';

/**
 * Rotating a secret with an overlap (docs/operator-insight.md): a new SecretID answered, the replaced one
 * authenticating until the overlap ends and nowhere after, the token otherwise unchanged.
 */
describe('PUT /v1/acl/token/:AccessorID/rotate', () => {
  let d: TestDaemon;
  let clock: ManualClock;
  let policyID: string;
  beforeAll(async () => {
    clock = new ManualClock(Date.UTC(2030, 0, 1, 12));
    d = await startTestDaemon({ clock });
    policyID = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'svc-web', Rules: 'service "web" { policy = "write" }' } })).body.ID;
  });
  afterAll(() => d.close());

  const newToken = async (body: object = {}) =>
    (await d.api('PUT', '/v1/acl/token', { body: { Description: 'rotated', Policies: [{ ID: policyID }], ...body } })).body;
  const self = (secret: string) => apiFor(d.url, secret)('GET', '/v1/acl/token/self');
  const mayWriteWeb = async (secret: string) => {
    const res = await apiFor(d.url, secret)('POST', '/v1/internal/acl/authorize', {
      body: [{ Resource: 'service', Segment: 'web', Access: 'write' }],
    });
    return res.status === 200 ? (res.body as Array<{ Allow: boolean }>)[0]?.Allow : res.status;
  };

  it('answers a new SecretID; the old one works for the overlap, then is ACL not found; content, Hash and CreateIndex unchanged', async () => {
    const t = await newToken();
    const rotated = await d.api('PUT', `/v1/acl/token/${t.AccessorID}/rotate`, { body: { Overlap: '10m' } });
    expect(rotated.status).toBe(200);
    const r = rotated.body;
    expect(r.SecretID).toMatch(/^[0-9a-f-]{36}$/);
    expect(r.SecretID).not.toBe(t.SecretID);
    expect(r).toMatchObject({ AccessorID: t.AccessorID, Description: 'rotated', Hash: t.Hash, CreateIndex: t.CreateIndex });
    expect(r.ModifyIndex).toBeGreaterThan(t.ModifyIndex);
    expect(r.PreviousSecretExpirationTime).toBe(new Date(clock.now() + 600_000).toISOString());
    expect(r.PreviousSecretID).toBeUndefined();
    expect(Number(rotated.headers.get('x-service-index'))).toBe(r.ModifyIndex);

    // Both secrets authenticate during the overlap; the old one never reads the new one.
    expect(await mayWriteWeb(r.SecretID)).toBe(true);
    expect(await mayWriteWeb(t.SecretID)).toBe(true);
    const oldSelf = await self(t.SecretID);
    expect(oldSelf.status).toBe(200);
    expect(oldSelf.body.AccessorID).toBe(t.AccessorID);
    expect(oldSelf.body.SecretID).toBe('<hidden>');
    expect((await self(r.SecretID)).body.SecretID).toBe(r.SecretID);
    // The enforcing client's view for the old secret ends with the overlap.
    const view = await apiFor(d.url, t.SecretID)('GET', '/v1/internal/acl/authorizer');
    expect(view.body.ExpirationTime).toBe(r.PreviousSecretExpirationTime);
    expect((await apiFor(d.url, r.SecretID)('GET', '/v1/internal/acl/authorizer')).body.ExpirationTime).toBeUndefined();

    // No view shows the replaced secret, to anyone.
    for (const path of [`/v1/acl/token/${t.AccessorID}`, `/v1/acl/token/${t.AccessorID}?expanded`, '/v1/acl/tokens']) {
      const res = await d.api('GET', path);
      expect(res.text).not.toContain(t.SecretID);
      expect(res.text).not.toContain('PreviousSecretID');
    }

    clock.advance(600_000 - 1);
    expect(await mayWriteWeb(t.SecretID)).toBe(true);
    clock.advance(1);
    expect(await mayWriteWeb(t.SecretID)).toBe(403);
    expect((await self(t.SecretID)).status).toBe(403);
    expect(await mayWriteWeb(r.SecretID)).toBe(true);
    // The token's read and its Hash are the same as before the rotation, but for the secret and index.
    const after = (await d.api('GET', `/v1/acl/token/${t.AccessorID}`)).body;
    expect(after).toMatchObject({
      SecretID: r.SecretID,
      Hash: t.Hash,
      ModifyIndex: r.ModifyIndex,
      Policies: [{ ID: policyID, Name: 'svc-web' }],
    });
  });

  it('without an overlap the old secret stops at once; a second rotation ends the first overlap', async () => {
    const t = await newToken();
    const r1 = (await d.api('PUT', `/v1/acl/token/${t.AccessorID}/rotate`)).body;
    expect(r1.PreviousSecretExpirationTime).toBeUndefined();
    expect(await mayWriteWeb(t.SecretID)).toBe(403);
    const r2 = (await d.api('PUT', `/v1/acl/token/${t.AccessorID}/rotate`, { body: { Overlap: '1h' } })).body;
    const r3 = (await d.api('PUT', `/v1/acl/token/${t.AccessorID}/rotate`, { body: { Overlap: 60e9 } })).body;
    expect(await mayWriteWeb(r1.SecretID)).toBe(403);
    expect(await mayWriteWeb(r2.SecretID)).toBe(true);
    expect(await mayWriteWeb(r3.SecretID)).toBe(true);
    expect(r3.PreviousSecretExpirationTime).toBe(new Date(clock.now() + 60_000).toISOString());
  });

  it('an update keeps the overlap, and a replaced secret cannot be taken by a new token', async () => {
    const t = await newToken();
    const r = (await d.api('PUT', `/v1/acl/token/${t.AccessorID}/rotate`, { body: { Overlap: '5m' } })).body;
    const updated = await d.api('PUT', `/v1/acl/token/${t.AccessorID}`, { body: { ...r, Description: 'renamed' } });
    expect(updated.status).toBe(200);
    expect(updated.body.PreviousSecretExpirationTime).toBe(r.PreviousSecretExpirationTime);
    expect(await mayWriteWeb(t.SecretID)).toBe(true);
    const taken = await d.api('PUT', '/v1/acl/token', { body: { SecretID: t.SecretID } });
    expect([taken.status, taken.body.message]).toEqual([409, 'Invalid Token: SecretID is already in use']);
    // Deleting the token with its own replaced secret is refused as with its current one.
    const own = await apiFor(d.url, t.SecretID)('DELETE', `/v1/acl/token/${t.AccessorID}`);
    expect(own.status).not.toBe(200);
  });

  it('refuses a bad Overlap, the anonymous token, a missing token and a caller without acl:write, changing nothing', async () => {
    const t = await newToken();
    const rotate = (body: unknown, id = t.AccessorID, token?: string) =>
      (token ? apiFor(d.url, token) : d.api)('PUT', `/v1/acl/token/${id}/rotate`, { body });
    const cases: Array<[unknown, number, string]> = [
      [{ Overlap: '25h' }, 400, 'Invalid Overlap: must be between 0 and 24h, got 25h'],
      [{ Overlap: 'soon' }, 400, 'Overlap'],
      [{ Overlap: '10m', Extra: 1 }, 400, 'Extra'],
    ];
    for (const [body, status, message] of cases) {
      const res = await rotate(body);
      expect(res.status, JSON.stringify(body)).toBe(status);
      expect(res.body.message).toContain(message);
    }
    expect((await rotate({}, '00000000-0000-0000-0000-000000000002')).status).toBe(403);
    expect((await rotate({}, '6f1b0c9e-8a53-4c4e-9b1e-3f4d2a1b0c9e')).status).toBe(400);
    expect((await rotate({}, t.AccessorID, t.SecretID)).status).toBe(403);
    const read = (await d.api('GET', `/v1/acl/token/${t.AccessorID}`)).body;
    expect(read).toMatchObject({ SecretID: t.SecretID, ModifyIndex: t.ModifyIndex });
    expect(read.PreviousSecretExpirationTime).toBeUndefined();
  });

  it('is audited as token-rotate naming the accessor, never a secret', async () => {
    const t = await newToken();
    const r = (await d.api('PUT', `/v1/acl/token/${t.AccessorID}/rotate`, { body: { Overlap: '1m' } })).body;
    const audit = await d.api('GET', `/v1/operator/audit?type=token-rotate&id=${t.AccessorID}`);
    expect(audit.body.Events).toHaveLength(1);
    expect(audit.body.Events[0]).toMatchObject({ Type: 'token-rotate', Objects: [{ Kind: 'token', ID: t.AccessorID, Hash: t.Hash }] });
    expect(audit.text).not.toContain(t.SecretID);
    expect(audit.text).not.toContain(r.SecretID);
  });
});
