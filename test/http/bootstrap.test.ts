import { access, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type TestDaemon, apiFor, startTestDaemon } from '../helpers/test-daemon.js';

describe('bootstrap', () => {
  let d: TestDaemon;
  beforeEach(async () => {
    d = await startTestDaemon({ config: { initial_management_token: undefined } });
  });
  afterEach(() => d.close());

  it('hands out one management token, then refuses with the reset index', async () => {
    const api = apiFor(d.url);
    const first = await api('PUT', '/v1/acl/bootstrap');
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      Description: 'Bootstrap Token (Global Management)',
      Policies: [{ ID: '00000000-0000-0000-0000-000000000001', Name: 'global-management' }],
      Local: false,
    });
    expect(first.body.ID).toBe(first.body.SecretID);
    expect((await apiFor(d.url, first.body.SecretID)('PUT', '/v1/acl/token', { body: {} })).status).toBe(200);

    const second = await api('PUT', '/v1/acl/bootstrap');
    expect(second.status).toBe(403);
    expect(second.body.code).toBe('NOT_PERMITTED');
    expect(second.body.message).toBe(`Permission denied: ACL bootstrap no longer allowed (reset index: ${first.body.CreateIndex})`);
  });

  it('allows exactly one more bootstrap when the reset index is written to the data dir', async () => {
    const api = apiFor(d.url);
    const first = (await api('PUT', '/v1/acl/bootstrap')).body;
    const resetFile = join(d.dataDir, 'acl-bootstrap-reset');

    await writeFile(resetFile, `${first.CreateIndex + 100}\n`);
    const wrong = await api('PUT', '/v1/acl/bootstrap');
    expect(wrong.status).toBe(403);
    expect(wrong.body.message).toContain(
      `Invalid bootstrap reset index (specified ${first.CreateIndex + 100}, reset index: ${first.CreateIndex})`,
    );

    await writeFile(resetFile, `${first.CreateIndex}\n`);
    const again = await api('PUT', '/v1/acl/bootstrap');
    expect(again.status).toBe(200);
    expect(again.body.SecretID).not.toBe(first.SecretID);
    await expect(access(resetFile)).rejects.toThrow();
    const third = await api('PUT', '/v1/acl/bootstrap');
    expect(third.status).toBe(403);
    expect(third.body.message).toContain(`reset index: ${again.body.CreateIndex}`);
    // The old management token keeps working.
    expect((await apiFor(d.url, first.SecretID)('GET', '/v1/acl/tokens')).status).toBe(200);
  });

  it('uses a BootstrapSecret from the body, and checks it', async () => {
    const api = apiFor(d.url);
    expect((await api('PUT', '/v1/acl/bootstrap', { body: { BootstrapSecret: 'not-a-uuid' } })).status).toBe(400);
    expect((await api('PUT', '/v1/acl/bootstrap', { body: { BootstrapSecret: '00000000-0000-0000-0000-000000000007' } })).status).toBe(400);
    const secret = crypto.randomUUID();
    const res = await api('PUT', '/v1/acl/bootstrap', { body: { BootstrapSecret: secret } });
    expect(res.status).toBe(200);
    expect(res.body.SecretID).toBe(secret);
    expect((await apiFor(d.url, secret)('GET', '/v1/acl/token/self')).body.AccessorID).toBe(res.body.AccessorID);
  });

  it('writes the bound address to DATA_DIR/http-addr', async () => {
    expect((await readFile(join(d.dataDir, 'http-addr'), 'utf8')).trim()).toBe(d.url.replace('http://', ''));
  });
});

describe('initial management token', () => {
  it('creates the token once and counts as the bootstrap', async () => {
    const d = await startTestDaemon();
    try {
      const self = await d.api('GET', '/v1/acl/token/self');
      expect(self.body).toMatchObject({ SecretID: d.management, Policies: [{ Name: 'global-management' }] });
      const boot = await apiFor(d.url)('PUT', '/v1/acl/bootstrap');
      expect(boot.status).toBe(403);
      expect(boot.body.message).toContain('ACL bootstrap no longer allowed');
    } finally {
      await d.close();
    }
  });
});

describe('output formatting', () => {
  it('indents with ?pretty and keeps errors in the same shape', async () => {
    const d = await startTestDaemon();
    try {
      const res = await d.api('GET', '/v1/acl/token/self?pretty');
      expect(res.text).toMatch(/^\{\n {4}"AccessorID": /);
      const err = await d.api('GET', `/v1/acl/token/${crypto.randomUUID()}?pretty`);
      expect(err.text).toMatch(/^\{\n {4}"statusCode": 404/);
    } finally {
      await d.close();
    }
  });
});
