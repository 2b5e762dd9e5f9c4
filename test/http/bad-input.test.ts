import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';

/** Every route, with a live object ID where the path needs one. */
function routes(tokenID: string, policyID: string): Array<[string, string]> {
  return [
    ['PUT', '/v1/acl/bootstrap'],
    ['PUT', '/v1/acl/token'],
    ['GET', '/v1/acl/token/self'],
    ['GET', `/v1/acl/token/${tokenID}`],
    ['PUT', `/v1/acl/token/${tokenID}`],
    // Deletes ignore bodies: aim them at IDs that do not exist so the targets survive.
    ['DELETE', `/v1/acl/token/${crypto.randomUUID()}`],
    ['PUT', `/v1/acl/token/${tokenID}/clone`],
    ['GET', '/v1/acl/tokens'],
    ['PUT', '/v1/acl/policy'],
    ['GET', `/v1/acl/policy/${policyID}`],
    ['PUT', `/v1/acl/policy/${policyID}`],
    ['DELETE', `/v1/acl/policy/${crypto.randomUUID()}`],
    ['GET', '/v1/acl/policy/name/some-name'],
    ['GET', '/v1/acl/policies'],
    ['GET', '/v1/status/leader'],
  ];
}

const BODIES: Array<[string, string]> = [
  ['malformed JSON', '{"Description": '],
  ['a JSON array', '[1, 2, 3]'],
  ['a JSON string', '"hello"'],
  ['JSON null', 'null'],
  ['a number', '42'],
  ['wrong field types', '{"Description": 5, "Policies": "all", "Local": "yes", "Name": [], "Rules": {}}'],
  ['unknown fields', '{"Bogus": true, "__proto__": {"admin": true}}'],
  [
    'a huge array',
    JSON.stringify({
      Policies: Array.from({ length: 5000 }, () => ({ Name: 'x' })),
      ServiceIdentities: Array.from({ length: 5000 }, () => ({ ServiceName: 'x' })),
    }),
  ],
  ['deep nesting', `${'['.repeat(20000)}${']'.repeat(20000)}`],
  ['deep objects', `{"TemplatedPolicies":[{"TemplateVariables":${'{"a":'.repeat(2000)}1${'}'.repeat(2000)}}]}`],
  [
    'odd unicode',
    '{"Description": "\\ud800\\udfff\\u0000", "Name": "n\\u00e4me\\u202e", "ServiceIdentities": [{"ServiceName": "\\u0430pi"}]}',
  ],
  ['binary garbage', '\u0000\u0001\u0002\uFFFD\uFFFE'],
];

const QUERIES = [
  '?index=abc',
  '?index=-1',
  '?wait=forever',
  '?wait=-5s',
  '?stale&consistent',
  '?ns=Not_Valid',
  '?ns=a&ns=b',
  '?partition=%2e%2e',
  '?token=&token=x',
  '?ns=%zz',
];

const isJsonError = (res: { status: number; headers: Headers; body: unknown }) => {
  const body = res.body as { code?: unknown; message?: unknown; statusCode?: unknown } | undefined;
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(typeof body?.code).toBe('string');
  expect(typeof body?.message).toBe('string');
  expect(body?.statusCode).toBe(res.status);
};

describe('hostile input', () => {
  let d: TestDaemon;
  let tokenID: string;
  let policyID: string;

  beforeAll(async () => {
    d = await startTestDaemon();
    tokenID = (await d.api('PUT', '/v1/acl/token', { body: { Description: 'target' } })).body.AccessorID;
    policyID = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'target' } })).body.ID;
  });
  afterAll(() => d.close());

  it('answers every bad body on every route with a 4xx JSON error, never a 500', async () => {
    for (const [method, path] of routes(tokenID, policyID)) {
      if (method === 'GET') continue;
      for (const [name, raw] of BODIES) {
        const res = await d.api(method, path, { rawBody: raw, headers: { 'Content-Type': 'application/json' } });
        const where = `${method} ${path} with ${name}`;
        expect(res.status, where).toBeLessThan(500);
        if (res.status >= 400) isJsonError(res);
        // Only DELETE (which has no body) may succeed; nothing else should accept these bodies.
        if (method !== 'DELETE') expect(res.status, where).toBeGreaterThanOrEqual(400);
      }
    }
    // The targets are intact (bad updates wrote nothing).
    expect((await d.api('GET', `/v1/acl/token/${tokenID}`)).body.Description).toBe('target');
    expect((await d.api('GET', `/v1/acl/policy/${policyID}`)).body.Name).toBe('target');
  });

  it('answers an oversized body with 413 on every route that takes a body', async () => {
    const big = JSON.stringify({ Description: 'x'.repeat(1024 * 1024 + 10) });
    for (const [method, path] of routes(tokenID, policyID)) {
      if (method !== 'PUT') continue;
      const res = await d.api(method, path, { rawBody: big });
      expect(res.status, `${method} ${path}`).toBe(413);
      expect(res.body.code).toBe('BODY_TOO_LARGE');
    }
  });

  it('answers bad query strings with 400 JSON errors', async () => {
    for (const [method, path] of routes(tokenID, policyID)) {
      if (method !== 'GET' || path.startsWith('/v1/status')) continue;
      for (const q of QUERIES) {
        const res = await d.api(method, path + q);
        expect(res.status, `${method} ${path}${q}`).toBeGreaterThanOrEqual(400);
        expect(res.status, `${method} ${path}${q}`).toBeLessThan(500);
        isJsonError(res);
      }
    }
    const index = await d.api('GET', '/v1/acl/tokens?index=abc');
    expect(index.body.message).toBe('Invalid index');
    const wait = await d.api('GET', '/v1/acl/tokens?index=1&wait=forever');
    expect(wait.body.message).toBe('Invalid wait time');
    expect((await d.api('GET', '/v1/acl/tokens?stale&consistent')).body.message).toContain('stale');
  });

  it('answers odd IDs in paths with a 4xx', async () => {
    const ids = ['not-a-uuid', '%00', '..%2F..%2Fetc', 'x'.repeat(10_000), '00000000-0000-0000-0000-00000000000Z', '%F0%9F%92%A9', '%zz'];
    for (const id of ids) {
      for (const [method, path] of [
        ['GET', `/v1/acl/token/${id}`],
        ['PUT', `/v1/acl/token/${id}`],
        ['DELETE', `/v1/acl/token/${id}`],
        ['PUT', `/v1/acl/token/${id}/clone`],
        ['GET', `/v1/acl/policy/${id}`],
        ['PUT', `/v1/acl/policy/${id}`],
        ['DELETE', `/v1/acl/policy/${id}`],
        ['GET', `/v1/acl/policy/name/${id}`],
      ] as const) {
        const res = await d.api(method, path, method === 'PUT' ? { body: { Name: 'x' } } : {});
        expect(res.status, `${method} ${path.slice(0, 80)}`).toBeGreaterThanOrEqual(400);
        expect(res.status, `${method} ${path.slice(0, 80)}`).toBeLessThan(500);
        isJsonError(res);
      }
    }
  });

  it('answers unknown paths with 404 and wrong methods with 405 and Allow', async () => {
    const unknown = await d.api('GET', '/v1/acl/nothing-here');
    expect(unknown.status).toBe(404);
    isJsonError(unknown);
    const wrong = await d.api('PATCH', '/v1/acl/token');
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('PUT, OPTIONS');
    isJsonError(wrong);
    const post = await d.api('POST', `/v1/acl/token/${tokenID}`);
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, PUT, DELETE, HEAD, OPTIONS');
  });

  it('answers OPTIONS with 200 and the methods the path serves, as Consul does', async () => {
    const res = await d.api('OPTIONS', `/v1/acl/token/${tokenID}`, { token: undefined });
    expect(res.status).toBe(200);
    expect(res.headers.get('allow')).toBe('GET, PUT, DELETE, HEAD, OPTIONS');
    expect((await d.api('OPTIONS', '/v1/acl/tokens')).headers.get('allow')).toBe('GET, HEAD, OPTIONS');
  });

  it('is still serving after all of it', async () => {
    expect((await d.api('GET', '/v1/acl/tokens')).status).toBe(200);
  });
});
