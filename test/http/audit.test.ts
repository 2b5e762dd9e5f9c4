import { randomUUID } from 'node:crypto';
import { readFile, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { SignJWT, exportSPKI, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/program.js';
import { WatchwordClient } from '../../src/client/index.js';
import { type TestDaemon, apiFor, startTestDaemon, waitFor } from '../helpers/test-daemon.js';

type Event = Record<string, any>;

/** The audit file's lines, as written. */
async function lines(d: TestDaemon): Promise<Event[]> {
  const text = await readFile(join(d.dataDir, 'audit', 'audit.log'), 'utf8');
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Event);
}

/** Events of a type, through GET /v1/operator/audit. */
async function events(d: TestDaemon, query = ''): Promise<Event[]> {
  const res = await d.api('GET', `/v1/operator/audit${query}`);
  expect(res.status).toBe(200);
  return res.body.Events as Event[];
}

/**
 * The audit log (docs/audit.md: Audit log): every ACL write, bootstrap, snapshot, login and logout,
 * reaper deletion and refusal is a JSON line in <data_dir>/audit/audit.log and can be read back
 * through GET /v1/operator/audit and `watchword audit`; no secret is ever written.
 */
describe('the audit log', () => {
  let d: TestDaemon;
  const secrets: string[] = [];
  beforeAll(async () => {
    d = await startTestDaemon({ config: { token_min_ttl: '1s', reap_interval: '100ms' } });
    secrets.push(d.management);
  });
  afterAll(() => d.close());

  it('records the initial management token at start-up, and the file is 0600 in a 0700 directory', async () => {
    await waitFor(async () => (await lines(d).catch(() => [])).some((e) => e.Type === 'bootstrap'), 5000);
    const [e] = (await lines(d)).filter((x) => x.Type === 'bootstrap');
    expect(e).toMatchObject({
      Type: 'bootstrap',
      AccessorID: 'initial_management_token',
      Datacenter: 'dc1',
      Server: 'test-node',
      Status: 200,
    });
    expect((e!.Objects as Event[]).map((o) => o.Kind)).toContain('token');
    expect(((await stat(join(d.dataDir, 'audit', 'audit.log'))).mode & 0o777).toString(8)).toBe('600');
    expect(((await stat(join(d.dataDir, 'audit'))).mode & 0o777).toString(8)).toBe('700');
  });

  it('records every ACL write with its kind, ID, place, new Hash and index, and the caller', async () => {
    const self = (await d.api('GET', '/v1/acl/token/self')).body;
    const p = await d.api('PUT', '/v1/acl/policy', { body: { Name: 'audited', Rules: 'acl = "read"' } });
    await d.api('PUT', `/v1/acl/policy/${p.body.ID}`, { body: { Name: 'audited', Description: 'changed', Rules: 'acl = "read"' } });
    const r = await d.api('PUT', '/v1/acl/role', { body: { Name: 'audited-role', Policies: [{ ID: p.body.ID }] } });
    await d.api('PUT', `/v1/acl/role/${r.body.ID}`, { body: { Name: 'audited-role' } });
    const t = await d.api('PUT', '/v1/acl/token', { body: { Description: 'audited token', Roles: [{ ID: r.body.ID }] } });
    secrets.push(t.body.SecretID);
    await d.api('PUT', `/v1/acl/token/${t.body.AccessorID}`, { body: { Description: 'renamed' } });
    const c = await d.api('PUT', `/v1/acl/token/${t.body.AccessorID}/clone`, { body: {} });
    secrets.push(c.body.SecretID);
    await d.api('DELETE', `/v1/acl/token/${c.body.AccessorID}`);
    await d.api('DELETE', `/v1/acl/role/${r.body.ID}`);
    await d.api('DELETE', `/v1/acl/policy/${p.body.ID}`);
    const seen = (await events(d, '?limit=1000')).reverse();
    const types = seen.map((e) => e.Type);
    for (const type of [
      'policy-create',
      'policy-update',
      'role-create',
      'role-update',
      'token-create',
      'token-update',
      'token-clone',
      'token-delete',
      'role-delete',
      'policy-delete',
    ])
      expect(types).toContain(type);
    const created = seen.find((e) => e.Type === 'token-create' && (e.Objects as Event[])[0]?.ID === t.body.AccessorID) as Event;
    expect(created).toMatchObject({
      AccessorID: self.AccessorID,
      Method: 'PUT',
      Path: '/v1/acl/token',
      Status: 200,
      RemoteAddr: '127.0.0.1',
      Index: t.body.CreateIndex,
    });
    expect(created.Time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(created.RequestID).not.toBe('');
    expect(created.Objects).toEqual([
      { Kind: 'token', ID: t.body.AccessorID, Namespace: 'default', Partition: 'default', Hash: t.body.Hash },
    ]);
    const deleted = seen.find((e) => e.Type === 'policy-delete') as Event;
    expect(deleted.Objects).toEqual([{ Kind: 'policy', ID: p.body.ID, Deleted: true }]);
    // Filters: by object, by kind, by caller, by type.
    expect((await events(d, `?id=${t.body.AccessorID}`)).map((e) => e.Type).sort()).toEqual(['token-create', 'token-update']);
    expect((await events(d, '?kind=role')).every((e) => (e.Objects as Event[]).some((o) => o.Kind === 'role'))).toBe(true);
    expect((await events(d, `?accessor=${self.AccessorID}&type=token-delete`)).length).toBe(1);
  });

  it('records refusals: the permission lacked, an unknown secret by its HMAC (the same each time), no token as anonymous', async () => {
    const reader = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ Name: 'builtin/global-read-only' }] } })).body;
    secrets.push(reader.SecretID);
    expect((await d.api('PUT', '/v1/acl/policy', { token: reader.SecretID, body: { Name: 'nope' } })).status).toBe(403);
    const unknown = randomUUID();
    secrets.push(unknown);
    for (let i = 0; i < 2; i++) expect((await d.api('GET', '/v1/acl/tokens', { token: unknown })).status).toBe(403);
    // The direct path (a token read) records refusals too.
    expect((await d.api('GET', `/v1/acl/token/${reader.AccessorID}`, { token: unknown })).status).toBe(403);
    expect((await d.api('GET', '/v1/acl/tokens', { token: undefined })).status).toBe(403);
    const refused = await events(d, '?type=refused');
    const denied = refused.find((e) => e.AccessorID === reader.AccessorID) as Event;
    expect(denied).toMatchObject({ Status: 403, Code: 'PERMISSION_DENIED', Method: 'PUT', Path: '/v1/acl/policy' });
    expect(denied.Reason).toContain("lacks permission 'acl:write'");
    const byHmac = refused.filter((e) => String(e.AccessorID).startsWith('hmac:'));
    expect(byHmac.length).toBe(3);
    expect(new Set(byHmac.map((e) => e.AccessorID)).size).toBe(1);
    expect(byHmac.map((e) => e.Code)).toEqual(['ACL_NOT_FOUND', 'ACL_NOT_FOUND', 'ACL_NOT_FOUND']);
    expect(refused.some((e) => e.AccessorID === 'anonymous' && e.Code === 'PERMISSION_DENIED')).toBe(true);
    // ?token= is never written, even on a refused request.
    expect((await d.api('GET', `/v1/acl/tokens?token=${unknown}`, { token: undefined })).status).toBe(403);
    await waitFor(
      async () =>
        (await lines(d)).some(
          (e) =>
            e.Type === 'refused' &&
            e.Path === '/v1/acl/tokens' &&
            e.AccessorID === byHmac[0]?.AccessorID &&
            e.Time > (byHmac[0]?.Time as string),
        ),
      3000,
    );
  });

  it('records login (method, token, rules matched), logout, snapshot save and restore, and the reaper', async () => {
    const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
    await d.api('PUT', '/v1/acl/auth-method', {
      body: {
        Name: 'audit-jwt',
        Type: 'jwt',
        Config: { JWTValidationPubKeys: [await exportSPKI(publicKey)], ClaimMappings: { svc: 'service' } },
      },
    });
    const rule = (
      await d.api('PUT', '/v1/acl/binding-rule', { body: { AuthMethod: 'audit-jwt', BindType: 'service', BindName: '${value.service}' } })
    ).body;
    const jwt = await new SignJWT({ svc: 'web' }).setProtectedHeader({ alg: 'RS256' }).setExpirationTime('5m').sign(privateKey);
    const login = (await d.api('POST', '/v1/acl/login', { token: undefined, body: { AuthMethod: 'audit-jwt', BearerToken: jwt } })).body;
    secrets.push(login.SecretID, jwt);
    expect((await d.api('POST', '/v1/acl/logout', { token: login.SecretID })).status).toBe(200);
    const [logout] = await events(d, '?type=logout');
    expect(logout).toMatchObject({ AccessorID: login.AccessorID, AuthMethod: 'audit-jwt' });
    const [loggedIn] = await events(d, '?type=login');
    expect(loggedIn).toMatchObject({ AccessorID: 'anonymous', AuthMethod: 'audit-jwt', BindingRules: [rule.ID] });
    expect((loggedIn!.Objects as Event[])[0]).toMatchObject({ Kind: 'token', ID: login.AccessorID });

    const client = new WatchwordClient({ address: d.url, token: d.management });
    const snap = await client.snapshot.save();
    await client.snapshot.restore(snap);
    const [saved] = await events(d, '?type=snapshot-save');
    expect((saved!.Counts as Event).tokens).toBeGreaterThan(2);
    const [restored] = await events(d, '?type=snapshot-restore');
    expect((restored!.Counts as Event).policies).toBeGreaterThanOrEqual(2);

    const short = (await d.api('PUT', '/v1/acl/token', { body: { ExpirationTTL: '1s', Local: true } })).body;
    secrets.push(short.SecretID);
    await waitFor(async () => (await events(d, `?type=reap&id=${short.AccessorID}`)).length === 1, 8000, 100);
    const [reaped] = await events(d, `?type=reap&id=${short.AccessorID}`);
    expect(reaped).toMatchObject({ AccessorID: 'reaper', Objects: [{ Kind: 'token', ID: short.AccessorID, Deleted: true }] });
  });

  it('pages newest first with a cursor, and follows with ?after', async () => {
    for (let i = 0; i < 5; i++) await d.api('PUT', '/v1/acl/policy', { body: { Name: `paged-${i}` } });
    const first = await d.api('GET', '/v1/operator/audit?type=policy-create&limit=2');
    expect(first.body.Events.map((e: Event) => (e.Objects as Event[])[0]?.ID)).toHaveLength(2);
    expect(first.body.NextCursor).toMatch(/^\d+$/);
    const second = await d.api('GET', `/v1/operator/audit?type=policy-create&limit=2&cursor=${first.body.NextCursor}`);
    expect(second.body.Events).toHaveLength(2);
    expect(Date.parse(String(second.body.Events[0]?.Time))).toBeLessThanOrEqual(Date.parse(String(first.body.Events[1]?.Time)));
    const latest = first.body.Latest as number;
    await d.api('PUT', '/v1/acl/policy', { body: { Name: 'after-latest' } });
    const after = await d.api('GET', `/v1/operator/audit?after=${latest}`);
    expect(after.body.Events.map((e: Event) => e.Type)).toEqual(['policy-create']);
    expect(after.body.Latest).toBeGreaterThan(latest);
  });

  it('needs operator:read and acl:read', async () => {
    const acl = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ Name: 'builtin/global-read-only' }] } })).body;
    secrets.push(acl.SecretID);
    const op = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'op-only', Rules: 'operator = "read"' } })).body;
    const opToken = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: op.ID }] } })).body;
    secrets.push(opToken.SecretID);
    expect((await d.api('GET', '/v1/operator/audit', { token: undefined })).status).toBe(403);
    expect((await d.api('GET', '/v1/operator/audit', { token: opToken.SecretID })).status).toBe(403);
    // global-read-only reads operator and acl.
    expect((await d.api('GET', '/v1/operator/audit', { token: acl.SecretID })).status).toBe(200);
  });

  it('`watchword audit` prints the events, filtered', async () => {
    let out = '';
    const code = await runCli(['audit', '-type', 'policy-create', '-limit', '3'], {
      out: (t) => void (out += t),
      err: (t) => void (out += t),
      env: { WATCHWORD_HTTP_ADDR: d.url, WATCHWORD_HTTP_TOKEN: d.management },
      setExitCode: () => undefined,
    });
    expect(code, out).toBe(0);
    const rows = out.trim().split('\n');
    expect(rows[0]).toMatch(/^Time\s+Type\s+Accessor\s+Remote\s+Status\s+Objects/);
    expect(rows.slice(1)).toHaveLength(3);
    for (const r of rows.slice(1)) expect(r).toMatch(/policy-create/);
    let json = '';
    await runCli(['audit', '-type', 'refused', '-limit', '1', '-format', 'json'], {
      out: (t) => void (json += t),
      err: () => undefined,
      env: { WATCHWORD_HTTP_ADDR: d.url, WATCHWORD_HTTP_TOKEN: d.management },
      setExitCode: () => undefined,
    });
    expect((JSON.parse(json) as Event[])[0]?.Type).toBe('refused');
  });

  it('never writes a secret the test made, in any audit file', async () => {
    const dir = join(d.dataDir, 'audit');
    let all = '';
    for (const f of await readdir(dir)) all += await readFile(join(dir, f), 'utf8');
    expect(all.length).toBeGreaterThan(1000);
    for (const s of secrets) expect(all.includes(s), `secret ${s.slice(0, 8)}… in the audit log`).toBe(false);
  });
});

describe('the audit log, off and rotated', () => {
  it('audit_log = false: nothing is written, and start-up says so', async () => {
    const d = await startTestDaemon({ config: { audit_log: false } });
    try {
      await d.api('PUT', '/v1/acl/policy', { body: { Name: 'unaudited' } });
      expect(await readdir(join(d.dataDir, 'audit')).catch(() => [])).toEqual([]);
    } finally {
      await d.close();
    }
  });

  it('rotates by size, keeping audit_log_rotate_max_files', async () => {
    const d = await startTestDaemon({ config: { audit_log_rotate_bytes: 4096, audit_log_rotate_max_files: 2 } });
    try {
      const api = apiFor(d.url, d.management);
      for (let i = 0; i < 60; i++) await api('PUT', '/v1/acl/policy', { body: { Name: `rot-${i}`, Description: 'x'.repeat(50) } });
      // Lines are appended within 50 ms of their write, and a late append may rotate once more:
      // the files are looked at once they have stayed as they are for 300 ms.
      const look = async () => {
        const names = (await readdir(join(d.dataDir, 'audit'))).sort();
        const sizes = await Promise.all(names.map(async (f) => (await stat(join(d.dataDir, 'audit', f)).catch(() => ({ size: -1 }))).size));
        return JSON.stringify([names, sizes]);
      };
      let last = '';
      await waitFor(
        async () => {
          const now = await look();
          const still = now === last && JSON.parse(now)[0].length === 8;
          last = now;
          return still;
        },
        10_000,
        300,
      );
      const files = (await readdir(join(d.dataDir, 'audit'))).sort();
      // Every event in audit.log, and the changes again in a file of their own, each rotated on its own (the refusals and the
      // clients' denials have files of their own too: none here).
      expect(files).toEqual([
        'audit-changes.log',
        'audit-changes.log.1',
        'audit-changes.log.2',
        'audit-denied-by-client.log',
        'audit-refused.log',
        'audit.log',
        'audit.log.1',
        'audit.log.2',
      ]);
      for (const f of files) expect(((await stat(join(d.dataDir, 'audit', f))).mode & 0o777).toString(8)).toBe('600');
      for (const f of files) expect((await stat(join(d.dataDir, 'audit', f))).size).toBeLessThanOrEqual(4096);
    } finally {
      await d.close();
    }
  });
});
