import { generateKeyPairSync } from 'node:crypto';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { tokenHash } from '../../src/domain/hash.js';
import { ANONYMOUS_TOKEN_ID } from '../../src/domain/ids.js';
import { Authorizer } from '../../src/domain/rules/authorizer.js';
import { parsePolicyRules } from '../../src/domain/rules/policy.js';
import { syntheticPolicies } from '../../src/domain/templates.js';
import type { AuthMethodRecord, BindingRuleRecord, PolicyRecord, TokenRecord } from '../../src/domain/types.js';
import { type SnapshotContent, readSnapshot, snapshotStream } from '../../src/store/snapshot.js';
import { LevelStore } from '../../src/store/level-store.js';
import { MANAGEMENT_SECRET, type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';
import { tempDir } from '../helpers/temp-dir.js';

/**
 * Fourth security review, finding 2: a restore took identity names and templated policies
 * unchecked, and a name was pasted into the rendered rules unquoted. A node identity named
 * `n1" { policy = "read" }\nacl = "write"\nnode "n2` made a token that shows no policy a
 * global-management one; an unknown TemplateName on the anonymous token made every
 * anonymous decision a 500. A restore now runs every API check on every record, names are
 * quoted when rendered, and an unknown template grants nothing (and is logged).
 */
const INJECTED = 'n1" { policy = "read" }\nacl = "write"\nnode "n2';
const FORGED_SECRET = '5f0c1d8e-aaaa-4bbb-8ccc-9ddddeeeeeee';
const PUBLIC_KEY = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'pem' }) as string;

async function toBuffer(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of stream) parts.push(c as Buffer);
  return Buffer.concat(parts);
}

describe('rendering a name into rules', () => {
  it('quotes it: an injected node identity names one odd node and grants nothing else', () => {
    const [p] = syntheticPolicies({
      ServiceIdentities: [],
      NodeIdentities: [{ NodeName: INJECTED, Datacenter: 'dc1' }],
      TemplatedPolicies: [],
    });
    const authz = new Authorizer(
      'default',
      'default',
      [{ rules: parsePolicyRules(p?.Rules ?? ''), namespace: 'default', partition: 'default', builtin: false }],
      'deny',
    );
    expect(authz.allows('acl', '', 'write', 'default', 'default')).toBe(false);
    expect(authz.allows('node', 'n2', 'write', 'default', 'default')).toBe(false);
    expect(authz.allows('node', INJECTED, 'write', 'default', 'default')).toBe(true);
  });

  it('renders an unknown template to no rules, with the problem named, instead of throwing', () => {
    const [p] = syntheticPolicies({ ServiceIdentities: [], NodeIdentities: [], TemplatedPolicies: [{ TemplateName: 'builtin/nope' }] });
    expect(p?.Rules).toBe('');
    expect(p?.Problem).toMatch(/unknown templated policy "builtin\/nope"/);
  });
});

describe('a restore checks grants, times, methods and rules as the API does', () => {
  let d: TestDaemon | undefined;
  afterEach(async () => {
    await d?.close();
    d = undefined;
  });

  async function saved(daemon: TestDaemon): Promise<SnapshotContent> {
    const res = await fetch(`${daemon.url}/v1/snapshot`, { headers: { 'X-Service-Token': daemon.management } });
    return readSnapshot(Buffer.from(await res.arrayBuffer()));
  }

  async function forged(c: SnapshotContent): Promise<Buffer> {
    return toBuffer(
      snapshotStream(
        {
          datacenter: c.header.Datacenter,
          primary: true,
          index: c.header.Index,
          logID: c.header.LogID,
          tokens: c.tokens,
          policies: c.policies,
          roles: c.roles,
          authMethods: c.authMethods,
          bindingRules: c.bindingRules,
          quotas: c.quotas,
          bootstrap: c.bootstrap,
        },
        new Date(),
      ),
    );
  }

  const forgedToken = (c: SnapshotContent, over: Partial<TokenRecord>): TokenRecord => ({
    ...(c.tokens.find((t) => t.Description === 'Initial Management Token') as TokenRecord),
    AccessorID: '5f0c1d8e-1111-4222-8333-944455556666',
    SecretID: FORGED_SECRET,
    Description: 'forged',
    Policies: [],
    ...over,
  });

  const method: AuthMethodRecord = {
    Name: 'jwt',
    Type: 'jwt',
    DisplayName: '',
    Description: '',
    MaxTokenTTL: '',
    TokenLocality: '',
    Config: { JWTValidationPubKeys: [PUBLIC_KEY], BoundIssuer: 'x' },
    Namespace: 'default',
    Partition: 'default',
    CreateIndex: 1,
    ModifyIndex: 1,
  };
  const rule = (over: Partial<BindingRuleRecord>): BindingRuleRecord => ({
    ID: '7b000000-1111-4222-8333-944455556666',
    Description: '',
    AuthMethod: 'jwt',
    Selector: '',
    BindType: 'service',
    BindName: 'web',
    Namespace: 'default',
    Partition: 'default',
    CreateIndex: 1,
    ModifyIndex: 1,
    ...over,
  });

  it.each<[string, (c: SnapshotContent) => void, RegExp]>([
    [
      'a node identity whose name closes the rule string',
      (c) => c.tokens.push(forgedToken(c, { NodeIdentities: [{ NodeName: INJECTED, Datacenter: 'dc1' }] })),
      /Node identity .* has an invalid name/,
    ],
    [
      'a service identity with an invalid name',
      (c) => c.tokens.push(forgedToken(c, { ServiceIdentities: [{ ServiceName: 'Web Server' }] })),
      /Service identity "Web Server" has an invalid name/,
    ],
    [
      'a node identity with an invalid datacenter',
      (c) => c.tokens.push(forgedToken(c, { NodeIdentities: [{ NodeName: 'n1', Datacenter: 'DC"1' }] })),
      /invalid datacenter name/,
    ],
    [
      'an unknown template on the anonymous token',
      (c) => {
        const anon = c.tokens.find((t) => t.AccessorID === ANONYMOUS_TOKEN_ID) as TokenRecord;
        anon.TemplatedPolicies = [{ TemplateName: 'builtin/nope' }];
      },
      /No such ACL templated policy with name "builtin\/nope"/,
    ],
    [
      'a templated policy whose variable is an injection',
      (c) =>
        c.tokens.push(forgedToken(c, { TemplatedPolicies: [{ TemplateName: 'builtin/service', TemplateVariables: { name: INJECTED } }] })),
      /Invalid templated policy "builtin\/service": name .* is invalid/,
    ],
    [
      'a role with an invalid identity',
      (c) =>
        c.roles.push({
          ...(c.roles[0] ?? {}),
          ID: '8c000000-1111-4222-8333-944455556666',
          Name: 'r',
          Description: '',
          Policies: [],
          ServiceIdentities: [{ ServiceName: '../x' }],
          NodeIdentities: [],
          TemplatedPolicies: [],
          Hash: '',
          Namespace: 'default',
          Partition: 'default',
          CreateIndex: 1,
          ModifyIndex: 1,
        }),
      /role .*Service identity "\.\.\/x" has an invalid name/,
    ],
    [
      'a CreateTime that is not a time',
      (c) => c.tokens.push(forgedToken(c, { CreateTime: 'yesterday' })),
      /(CreateTime is not an RFC 3339 time|expected an RFC 3339 time at V\.CreateTime)/,
    ],
    [
      'an ExpirationTime that is not a time',
      (c) => c.tokens.push(forgedToken(c, { ExpirationTime: 'never' })),
      /(ExpirationTime is not an RFC 3339 time|expected an RFC 3339 time at V\.ExpirationTime)/,
    ],
    [
      'a policy with an invalid datacenter',
      (c) =>
        c.policies.push({
          ...(c.policies.find((p) => p.Name === 'global-management') as PolicyRecord),
          ID: '9d000000-1111-4222-8333-944455556666',
          Name: 'p',
          Rules: 'acl = "read"',
          Datacenters: ['DC 1'],
        }),
      /invalid datacenter name/,
    ],
    ['an auth method of an unknown type', (c) => c.authMethods.push({ ...method, Type: 'ldap' }), /Type should be one of/],
    [
      'an auth method whose Config its type does not take',
      (c) => c.authMethods.push({ ...method, Config: { Surprise: true } }),
      /Invalid Auth Method/,
    ],
    [
      'an auth method whose MaxTokenTTL is not a duration',
      (c) => c.authMethods.push({ ...method, MaxTokenTTL: 'forever' }),
      /MaxTokenTTL "forever" is not a duration/,
    ],
    [
      'a binding rule whose selector does not parse',
      (c) => {
        c.authMethods.push(method);
        c.bindingRules.push(rule({ Selector: 'value.x ==' }));
      },
      /binding rule .*invalid Selector/,
    ],
    [
      'a binding rule of an unknown BindType',
      (c) => {
        c.authMethods.push(method);
        c.bindingRules.push(rule({ BindType: 'admin' as never }));
      },
      // Refused where the file's frames are read, before the rule's own check.
      /BindType/,
    ],
    [
      'a binding rule whose BindName names a variable the method lacks',
      (c) => {
        c.authMethods.push(method);
        c.bindingRules.push(rule({ BindName: '${value.nope}' }));
      },
      /binding rule .*invalid BindName: unknown variable \$\{value\.nope\}/,
    ],
  ])('refuses %s with 400 naming it, and changes nothing', async (_what, change, message) => {
    d = await startTestDaemon();
    const c = await saved(d);
    change(c);
    const before = (await d.api('GET', '/v1/acl/tokens')).headers.get('x-service-index');
    const res = await fetch(`${d.url}/v1/snapshot`, {
      method: 'PUT',
      headers: { 'X-Service-Token': d.management, Accept: 'application/json' },
      body: await forged(c),
    });
    const body = (await res.json()) as { code: string; message: string };
    expect(res.status).toBe(400);
    expect(body.code).toBe('INVALID_REQUEST');
    expect(body.message).toMatch(message);
    expect(body.message).toMatch(/nothing was restored$/);
    expect(JSON.stringify(body)).not.toContain(FORGED_SECRET);
    expect((await d.api('GET', '/v1/acl/tokens')).headers.get('x-service-index')).toBe(before);
    expect((await d.api('GET', '/v1/acl/token/self', { token: FORGED_SECRET })).status).toBe(403);
  });
});

describe('records already stored that the API would refuse', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  /** A daemon over a store in which `seed` wrote records directly (as an older build, or a restore before this fix, could have). */
  async function daemonOver(seed: (store: LevelStore) => Promise<void>) {
    const dir = await tempDir();
    cleanups.push(() => dir.remove());
    // First start: the built-ins and the anonymous token; then the records are written past the API.
    const first = await startTestDaemon({ config: { data_dir: dir.path } });
    await first.daemon.close();
    const store = await LevelStore.open(join(dir.path, 'store'), { durability: 'fsync', changeLog: true, datacenter: 'dc1' });
    await seed(store);
    await store.close();
    const lines: string[] = [];
    const logger = pino(
      { level: 'warn' },
      new Writable({
        write: (chunk, _e, done) => {
          lines.push(String(chunk));
          done();
        },
      }),
    );
    const d = await startTestDaemon({ config: { data_dir: dir.path }, logger });
    cleanups.push(() => d.daemon.close());
    return { d, lines };
  }

  it('an unknown template on the anonymous token grants nothing and is logged: anonymous decisions answer 200, never 500', async () => {
    const { d, lines } = await daemonOver(async (store) => {
      await store.transact((tx) => {
        const anon = tx.getToken(ANONYMOUS_TOKEN_ID) as TokenRecord;
        const next = { ...anon, TemplatedPolicies: [{ TemplateName: 'builtin/nope' }] };
        tx.put('tokens', { ...next, Hash: tokenHash(next) });
      });
    });
    const res = await fetch(`${d.url}/v1/internal/acl/authorize`, {
      method: 'POST',
      body: JSON.stringify([{ Resource: 'service', Segment: 'web', Access: 'read' }]),
    });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(await res.json()).toEqual([{ Resource: 'service', Segment: 'web', Access: 'read', Allow: false }]);
    expect((await fetch(`${d.url}/v1/acl/token/self?token=anonymous`)).status).toBe(200);
    const expanded = await d.api('GET', `/v1/acl/token/${ANONYMOUS_TOKEN_ID}?expanded`);
    expect(expanded.status).toBe(200);
    expect(JSON.stringify(expanded.body)).not.toContain('Problem');
    expect(lines.join('')).toMatch(/unknown templated policy \\"builtin\/nope\\": it grants nothing/);
  });

  it('a stored node identity that closes the rule string grants only that odd node', async () => {
    const { d } = await daemonOver(async (store) => {
      await store.transact((tx) => {
        const mgmt = tx.getTokenBySecret(MANAGEMENT_SECRET) as TokenRecord;
        const next: TokenRecord = {
          ...mgmt,
          AccessorID: '5f0c1d8e-1111-4222-8333-944455556666',
          SecretID: FORGED_SECRET,
          Description: 'no policy',
          Policies: [],
          NodeIdentities: [{ NodeName: INJECTED, Datacenter: 'dc1' }],
        };
        tx.put('tokens', { ...next, Hash: tokenHash(next) });
      });
    });
    const res = await fetch(`${d.url}/v1/internal/acl/authorize`, {
      method: 'POST',
      headers: { 'X-Service-Token': FORGED_SECRET },
      body: JSON.stringify([
        { Resource: 'acl', Access: 'write' },
        { Resource: 'node', Segment: 'n2', Access: 'write' },
        { Resource: 'node', Segment: INJECTED, Access: 'write' },
      ]),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as Array<{ Allow: boolean }>).map((a) => a.Allow)).toEqual([false, false, true]);
  });
});
