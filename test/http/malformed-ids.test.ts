import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDaemon, startTestDaemon } from '../helpers/daemon.js';

/**
 * A malformed ID in the path names no object, whatever the verb: GET, update, clone and DELETE
 * all answer the same 404 NOT_FOUND with the same message, and nothing is written.
 */
describe('a malformed ID in the path', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
    const m = await d.api('PUT', '/v1/acl/auth-method', { body: { Name: 'k8s', Type: 'kubernetes', Config: { Host: 'http://127.0.0.1:1', ServiceAccountJWT: 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJyZXZpZXdlciJ9.c2ln' } } });
    expect(m.body).toMatchObject({ Name: 'k8s' });
  });
  afterAll(() => d.close());

  const cases: Array<[resource: string, path: string, message: string, update: Record<string, unknown>, clone: boolean]> = [
    ['token', '/v1/acl/token', 'Cannot find token "unknown"', { Description: 'x' }, true],
    ['policy', '/v1/acl/policy', 'Cannot find policy "unknown"', { Name: 'x' }, false],
    ['role', '/v1/acl/role', 'Cannot find role "unknown"', { Name: 'x' }, false],
    ['binding rule', '/v1/acl/binding-rule', 'Cannot find binding rule "unknown"', { AuthMethod: 'k8s', BindType: 'service', BindName: 'x' }, false],
  ];

  describe.each(cases)('of a %s', (_resource, path, message, update, clone) => {
    const verbs: Array<[string, string, Record<string, unknown> | undefined]> = [
      ['GET', `${path}/unknown`, undefined],
      ['PUT', `${path}/unknown`, update],
      ['DELETE', `${path}/unknown`, undefined],
      ...(clone ? ([['PUT', `${path}/unknown/clone`, {}]] as Array<[string, string, Record<string, unknown>]>) : []),
    ];
    it.each(verbs)('%s %s is 404 NOT_FOUND with the read message', async (method, url, body) => {
      const index = async () => (await d.api('GET', '/v1/acl/tokens')).headers.get('x-service-index');
      const before = await index();
      expect(Number(before)).toBeGreaterThan(0);
      const res = await d.api(method, url, body === undefined ? {} : { body });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ statusCode: 404, error: 'Not Found', code: 'NOT_FOUND', message });
      expect(await index()).toBe(before);
    });
  });
});
