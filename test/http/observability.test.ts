import { compileErrors, validate } from '@readme/openapi-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loggedLines } from '../helpers/log-lines.js';
import { type TestDaemon, apiFor, startTestDaemon, waitFor } from '../helpers/test-daemon.js';

describe('blocking queries, headers and operations endpoints', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterAll(() => d.close());

  it('a blocked token list returns once another client creates a token, with a larger index', async () => {
    const first = await d.api('GET', '/v1/acl/tokens');
    const index = Number(first.headers.get('x-service-index'));
    expect(index).toBeGreaterThan(0);
    let settled = false;
    const blocked = d.api('GET', `/v1/acl/tokens?index=${index}&wait=30s`).then((r) => {
      settled = true;
      return r;
    });
    await waitFor(() => d.daemon.metrics.blockingInFlight() === 1);
    expect(settled).toBe(false);
    const created = await apiFor(d.url, d.management)('PUT', '/v1/acl/token', { body: { Description: 'wake up' } });
    const res = await blocked;
    expect(res.status).toBe(200);
    expect(Number(res.headers.get('x-service-index'))).toBeGreaterThan(index);
    expect(Number(res.headers.get('x-consul-index'))).toBe(Number(res.headers.get('x-service-index')));
    expect(res.body.map((t: { AccessorID: string }) => t.AccessorID)).toContain(created.body.AccessorID);
    expect(d.daemon.metrics.blockingInFlight()).toBe(0);
  });

  it('woken watchers of the same list share work but never each other’s view', async () => {
    const ro = (await d.api('PUT', '/v1/acl/policy', { body: { Name: 'watch-read', Rules: 'acl = "read"' } })).body;
    const reader = (await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ ID: ro.ID }] } })).body;
    const index = Number((await d.api('GET', '/v1/acl/tokens')).headers.get('x-service-index'));
    const path = `/v1/acl/tokens?index=${index}&wait=30s` as const;
    const asWriter = Array.from({ length: 5 }, () => d.api('GET', path));
    const asReader = Array.from({ length: 5 }, () => apiFor(d.url, reader.SecretID)('GET', path));
    await waitFor(() => d.daemon.metrics.blockingInFlight() === 10);
    const created = (await d.api('PUT', '/v1/acl/token', { body: { Description: 'seen by both' } })).body;
    for (const res of await Promise.all(asWriter)) {
      expect(res.body.find((t) => t.AccessorID === created.AccessorID)?.SecretID).toBe(created.SecretID);
    }
    for (const res of await Promise.all(asReader)) {
      const seen = res.body.find((t) => t.AccessorID === created.AccessorID);
      expect(seen?.SecretID).toBe('<hidden>');
    }
  });

  it('a blocking read with no change answers 200 with the same index once the wait is over', async () => {
    const index = Number((await d.api('GET', '/v1/acl/policies')).headers.get('x-service-index'));
    const started = Date.now();
    const res = await d.api('GET', `/v1/acl/policies?index=${index}&wait=1s`);
    const elapsed = Date.now() - started;
    expect(res.status).toBe(200);
    expect(Number(res.headers.get('x-service-index'))).toBe(index);
    // Waited the full second (plus at most 1/16 of jitter), then answered with current data.
    expect(elapsed).toBeGreaterThanOrEqual(990);
  });

  it('an index that is already behind answers at once', async () => {
    const res = await d.api('GET', '/v1/acl/tokens?index=1&wait=10m');
    expect(res.status).toBe(200);
  });

  it('releases blocked requests whose client goes away: the in-flight gauge returns to 0', async () => {
    const index = Number((await d.api('GET', '/v1/acl/roles')).headers.get('x-service-index'));
    const controllers = Array.from({ length: 20 }, () => new AbortController());
    const pending = controllers.map((c) =>
      fetch(`${d.url}/v1/acl/roles?index=${index}&wait=5m`, { headers: { 'X-Service-Token': d.management }, signal: c.signal }).catch(
        () => 'aborted',
      ),
    );
    await waitFor(() => d.daemon.metrics.blockingInFlight() === 20);
    for (const c of controllers) c.abort();
    expect(await Promise.all(pending)).toEqual(Array(20).fill('aborted'));
    await waitFor(() => d.daemon.metrics.blockingInFlight() === 0);
    const scrape = await d.api('GET', '/v1/agent/metrics?format=prometheus');
    expect(scrape.text).toMatch(/^watchword_blocking_queries_in_flight 0$/m);
  });

  it('sends the index headers on every ACL GET, errors included, under both names', async () => {
    for (const path of ['/v1/acl/tokens', `/v1/acl/token/${crypto.randomUUID()}`, '/v1/acl/policy/name/none', '/v1/acl/roles']) {
      const res = await d.api('GET', path);
      for (const prefix of ['x-service-', 'x-consul-']) {
        expect(Number(res.headers.get(`${prefix}index`)), path).toBeGreaterThan(0);
        expect(res.headers.get(`${prefix}knownleader`)).toBe('true');
        expect(res.headers.get(`${prefix}lastcontact`)).toBe('0');
        expect(res.headers.get(`${prefix}effective-consistency`)).toBe('leader');
      }
    }
    const denied = await apiFor(d.url)('GET', '/v1/acl/tokens');
    expect(denied.status).toBe(403);
    expect(Number(denied.headers.get('x-service-index'))).toBeGreaterThan(0);
    expect((await d.api('GET', '/v1/acl/tokens?stale')).headers.get('x-service-effective-consistency')).toBe('stale');
    expect((await d.api('GET', '/v1/acl/tokens?consistent')).headers.get('x-consul-effective-consistency')).toBe('consistent');
    expect((await d.api('GET', '/v1/acl/tokens?stale&consistent')).status).toBe(400);
  });

  it('returns the index of the change on writes', async () => {
    const res = await d.api('PUT', '/v1/acl/policy', { body: { Name: 'indexed' } });
    expect(Number(res.headers.get('x-service-index'))).toBe(res.body.ModifyIndex);
  });

  it('describes the agent without secrets, to agent:read only', async () => {
    const anonymous = await apiFor(d.url)('GET', '/v1/agent/self');
    expect(anonymous.status).toBe(403);
    expect(anonymous.body).toMatchObject({
      code: 'PERMISSION_DENIED',
      message:
        'Permission denied: the anonymous token (no token was sent) lacks permission \'agent:read\' on "test-node"; ' +
        'decided by the default policy: default_policy = "deny"',
    });
    const self = await d.api('GET', '/v1/agent/self');
    expect(self.status).toBe(200);
    expect(self.body.Config).toMatchObject({
      Datacenter: 'dc1',
      PrimaryDatacenter: 'dc1',
      Role: 'primary',
      NodeName: 'test-node',
      InitialManagementTokenSet: true,
      TokenMinTTL: '1m0s',
    });
    expect(self.body.Config.Version).toMatch(/^\d+\.\d+\.\d+/);
    expect(self.body.Stats.Tokens).toBeGreaterThan(1);
    // What the tokens' arena holds of replaced and deleted tokens, and how often it was reclaimed (none yet).
    expect(self.body.Stats.TokenGarbageBytes).toBeGreaterThanOrEqual(0);
    expect(self.body.Stats.TokenCompactions).toBe(0);
    expect(self.text).not.toContain(d.management);
    expect((await apiFor(d.url)('GET', '/v1/status/leader')).body).toBe(d.url.replace('http://', ''));
    expect((await apiFor(d.url)('GET', '/v1/catalog/datacenters')).body).toEqual(['dc1']);
  });

  it('exposes Prometheus metrics: requests by route and status, latency, store sizes, reaped tokens', async () => {
    await d.api('GET', '/v1/acl/tokens');
    expect((await apiFor(d.url)('GET', '/v1/agent/metrics?format=prometheus')).status).toBe(403);
    // Prometheus scrapes with a bearer token, as Consul's agents are scraped.
    const res = await apiFor(d.url)('GET', '/v1/agent/metrics?format=prometheus', { headers: { Authorization: `Bearer ${d.management}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(res.text).toMatch(/watchword_http_requests_total\{method="GET",route="\/v1\/acl\/tokens",status="200"\} \d+/);
    expect(res.text).toContain(
      'watchword_http_request_duration_seconds_bucket{le="0.005",method="GET",route="/v1/acl/tokens",status="200"}',
    );
    expect(res.text).toMatch(/watchword_objects_stored\{table="tokens"\} \d+/);
    expect(res.text).toMatch(/^watchword_tokens_reaped_total 0$/m);
    expect(res.text).toMatch(/^watchword_replication_connected 0$/m);
    expect(res.text).toContain('watchword_process_resident_memory_bytes');
    const json = await d.api('GET', '/v1/agent/metrics');
    expect(Array.isArray(json.body)).toBe(true);
  });

  it('publishes an OpenAPI 3.1 document with every route and its schemas, and it validates', async () => {
    const res = await apiFor(d.url)('GET', '/v1/openapi.json');
    expect(res.status).toBe(200);
    const doc = res.body;
    expect(doc.openapi).toBe('3.1.0');
    const documented = new Set<string>();
    for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
      for (const [method, op] of Object.entries(ops)) {
        documented.add(`${method.toUpperCase()} ${path}`);
        expect(op.responses['200'].content, `${method} ${path}`).toBeDefined();
        expect(op.responses['4XX'].content['application/json'].schema.$ref).toBe('#/components/schemas/Error');
      }
    }
    for (const expected of [
      'PUT /v1/acl/token',
      'GET /v1/acl/token/{AccessorID}',
      'PUT /v1/acl/token/{AccessorID}',
      'DELETE /v1/acl/token/{AccessorID}',
      'PUT /v1/acl/token/{AccessorID}/clone',
      'GET /v1/acl/token/self',
      'GET /v1/acl/tokens',
      'PUT /v1/acl/bootstrap',
      'PUT /v1/acl/policy',
      'GET /v1/acl/policy/{id}',
      'PUT /v1/acl/policy/{id}',
      'DELETE /v1/acl/policy/{id}',
      'GET /v1/acl/policy/name/{name}',
      'GET /v1/acl/policies',
      'PUT /v1/acl/role',
      'GET /v1/acl/role/{id}',
      'PUT /v1/acl/role/{id}',
      'DELETE /v1/acl/role/{id}',
      'GET /v1/acl/role/name/{name}',
      'GET /v1/acl/roles',
      'GET /v1/acl/templated-policies',
      'GET /v1/acl/templated-policy/name/{name}',
      'POST /v1/acl/templated-policy/preview/{name}',
      'GET /v1/status/leader',
      'GET /v1/agent/self',
      'GET /v1/agent/metrics',
      'GET /v1/catalog/datacenters',
      'GET /v1/openapi.json',
    ]) {
      expect(documented, expected).toContain(expected);
    }
    const create = doc.paths['/v1/acl/token'].put;
    expect(create.requestBody.content['application/json'].schema.properties.ServiceIdentities).toBeDefined();
    expect(create.responses['200'].content['application/json'].schema.$ref).toBe('#/components/schemas/Token');
    expect(doc.components.schemas.Token.properties.AccessorID.type).toBe('string');
    expect(doc.components.schemas.Role.required).toContain('Name');
    const result = await validate(structuredClone(doc) as Parameters<typeof validate>[0]);
    expect(result.valid, result.valid ? '' : compileErrors(result)).toBe(true);
  });
});

describe('GET /v1/agent/health', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterAll(() => d.close());

  it('answers anonymously with 200 and the checks by name; their output only to agent:read', async () => {
    const anonymous = await apiFor(d.url)('GET', '/v1/agent/health');
    expect(anonymous.status).toBe(200);
    expect(anonymous.body).toEqual({
      Status: 'passing',
      Checks: [
        { Name: 'store', Passing: true },
        { Name: 'leader', Passing: true },
      ],
    });
    const detailed = await d.api('GET', '/v1/agent/health');
    expect(detailed.body.Checks[0]).toEqual({ Name: 'store', Passing: true, Output: 'the store takes writes' });
    // A single server leads: ?role=leader passes.
    const leader = await apiFor(d.url)('GET', '/v1/agent/health?role=leader');
    expect(leader.status).toBe(200);
    expect(leader.body.Checks.map((c: { Name: string }) => c.Name)).toEqual(['store', 'leader', 'role']);
    expect((await apiFor(d.url)('GET', '/v1/agent/health?role=follower')).status).toBe(400);
  });
});

describe('the first start', () => {
  const started = async (config: Record<string, unknown>) => {
    const { logger, lines } = loggedLines();
    const d = await startTestDaemon({ config, logger });
    return { d, lines };
  };

  it('says ACLs are not bootstrapped, and how to, until they are', async () => {
    const fresh = await started({ initial_management_token: undefined });
    try {
      const line = fresh.lines.find((l) => l.includes('ACLs are not bootstrapped'));
      expect(line).toContain('`watchword acl bootstrap`');
      expect(line).toContain(`curl -X PUT ${fresh.d.url}/v1/acl/bootstrap`);
    } finally {
      await fresh.d.close();
    }
    const bootstrapped = await started({});
    try {
      expect(bootstrapped.lines.some((l) => l.includes('watchword agent started'))).toBe(true);
      expect(bootstrapped.lines.some((l) => l.includes('ACLs are not bootstrapped'))).toBe(false);
    } finally {
      await bootstrapped.d.close();
    }
  });
});
