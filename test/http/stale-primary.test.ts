import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { META } from '../../src/store/schema.js';
import { MANAGEMENT_SECRET, type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';

/**
 * A write forwarded by a secondary names the highest primary epoch that secondary has seen
 * (X-Service-Primary-Epoch). A primary behind it was replaced by a promotion: it refuses the
 * write (409 STALE_PRIMARY), at both doors, makes nothing, and audits the refusal.
 */
describe('a primary behind the epoch a forwarded write names', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterAll(() => d.close());

  const put = (path: string, epoch: string | undefined, body: unknown = { Description: 'forwarded' }) =>
    fetch(`${d.url}${path}`, {
      method: 'PUT',
      headers: {
        'X-Service-Token': MANAGEMENT_SECRET,
        'Content-Type': 'application/json',
        ...(epoch ? { 'X-Service-Primary-Epoch': epoch } : {}),
      },
      body: JSON.stringify(body),
    });

  it('refuses it with 409 STALE_PRIMARY at both doors and makes nothing; takes it at its own epoch; reads are not refused', async () => {
    const before = d.daemon.store.count('tokens');
    for (const path of ['/v1/acl/token', '/v1/acl/token?unused=1']) {
      const refused = await put(path, '2');
      expect(refused.status).toBe(409);
      expect(refused.headers.get('x-service-error-code')).toBe('STALE_PRIMARY');
      expect(await refused.text()).toMatch(/epoch is 1.*has seen epoch 2.*the write was not made here/);
    }
    expect((await put('/v1/acl/policy', '3', { Name: 'never', Rules: '' })).status).toBe(409);
    expect(d.daemon.store.count('tokens')).toBe(before);
    expect((await d.api('GET', '/v1/acl/policy/name/never')).status).toBe(404);
    // Its own epoch, or none (a client's own write), or nonsense: taken.
    expect((await put('/v1/acl/token', '1')).status).toBe(200);
    expect((await put('/v1/acl/token', undefined)).status).toBe(200);
    expect((await put('/v1/acl/token', 'x')).status).toBe(200);
    const read = await fetch(`${d.url}/v1/acl/token/self`, {
      headers: { 'X-Service-Token': MANAGEMENT_SECRET, 'X-Service-Primary-Epoch': '9' },
    });
    expect(read.status).toBe(200);
    // Audited as a refusal, with its code.
    const audit = await d.api('GET', '/v1/operator/audit?type=refused&limit=20');
    const refusals = (audit.body.Events as Array<Record<string, unknown>>).filter((e) => e.Code === 'STALE_PRIMARY');
    expect(refusals.length).toBeGreaterThanOrEqual(3);
    expect(refusals[0]).toMatchObject({ Type: 'refused', Status: 409, Method: 'PUT' });
  });

  it('takes a write naming a higher epoch once its own epoch is that high (a promoted primary)', async () => {
    await d.daemon.store.transact((tx) => tx.putMeta(META.primaryEpoch, 2));
    expect((await put('/v1/acl/token', '2')).status).toBe(200);
    expect((await put('/v1/acl/token', '3')).status).toBe(409);
    expect((await d.api('GET', '/v1/operator/primary')).body).toMatchObject({ Datacenter: 'dc1', Epoch: 2 });
  });
});
