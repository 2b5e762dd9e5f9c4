import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';

/**
 * A malformed ID in the path names no object, whatever the verb, and nothing is written: a read
 * answers 404 NOT_FOUND; an update, a clone or a delete, a write that cannot name its object,
 * answers 400 INVALID_REQUEST (as every Consul client raises on it), with the same message. A
 * well-formed ID that names nothing deletes nothing: `false`.
 */
describe('a malformed ID in the path', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
    const m = await d.api('PUT', '/v1/acl/auth-method', {
      body: {
        Name: 'k8s',
        Type: 'kubernetes',
        Config: { Host: 'http://127.0.0.1:1', ServiceAccountJWT: 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJyZXZpZXdlciJ9.c2ln' },
      },
    });
    expect(m.body).toMatchObject({ Name: 'k8s' });
  });
  afterAll(() => d.close());

  const cases: Array<[resource: string, path: string, message: string, update: Record<string, unknown>, clone: boolean]> = [
    ['token', '/v1/acl/token', 'Cannot find token "unknown"', { Description: 'x' }, true],
    ['policy', '/v1/acl/policy', 'Cannot find policy "unknown"', { Name: 'x' }, false],
    ['role', '/v1/acl/role', 'Cannot find role "unknown"', { Name: 'x' }, false],
    [
      'binding rule',
      '/v1/acl/binding-rule',
      'Cannot find binding rule "unknown"',
      { AuthMethod: 'k8s', BindType: 'service', BindName: 'x' },
      false,
    ],
  ];

  describe.each(cases)('of a %s', (_resource, path, message, update, clone) => {
    const verbs: Array<[string, string, Record<string, unknown> | undefined, number]> = [
      ['GET', `${path}/unknown`, undefined, 404],
      ['PUT', `${path}/unknown`, update, 400],
      // A write that cannot name its object, as an update is (a well-formed ID that names nothing deletes nothing: false).
      ['DELETE', `${path}/unknown`, undefined, 400],
      ...(clone ? ([['PUT', `${path}/unknown/clone`, {}, 400]] as Array<[string, string, Record<string, unknown>, number]>) : []),
    ];
    it.each(verbs)("%s %s is %i with Consul's message", async (method, url, body, status) => {
      const index = async () => (await d.api('GET', '/v1/acl/tokens')).headers.get('x-service-index');
      const before = await index();
      expect(Number(before)).toBeGreaterThan(0);
      const res = await d.api(method, url, body === undefined ? {} : { body });
      expect(res.status).toBe(status);
      expect(res.body).toEqual(
        status === 404
          ? { statusCode: 404, error: 'Not Found', code: 'NOT_FOUND', message }
          : { statusCode: 400, error: 'Bad Request', code: 'INVALID_REQUEST', message },
      );
      expect(await index()).toBe(before);
    });
  });
});
