import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { policyHash } from '../../src/domain/hash.js';
import { GLOBAL_MANAGEMENT_POLICY_ID } from '../../src/domain/ids.js';
import type { PolicyRecord, TokenRecord } from '../../src/domain/types.js';
import { type SnapshotContent, readSnapshot, snapshotStream } from '../../src/store/snapshot.js';
import { type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';

// A snapshot file is input like any other: its SHA-256 trailer is unkeyed, so anyone can
// make a file that verifies. A restore checks every invariant the API enforces before it
// changes anything, and recomputes every Hash (docs/security.md, "Security").

async function toBuffer(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of stream) parts.push(c as Buffer);
  return Buffer.concat(parts);
}

describe('restore checks what the API would', () => {
  let d: TestDaemon;
  let saved: SnapshotContent;

  beforeEach(async () => {
    d = await startTestDaemon();
    await d.api('PUT', '/v1/acl/policy', { body: { Name: 'reader', Rules: 'acl = "read"' } });
    const res = await fetch(`${d.url}/v1/snapshot`, { headers: { 'X-Service-Token': d.management } });
    saved = readSnapshot(Buffer.from(await res.arrayBuffer()));
  });

  afterEach(async () => {
    await d.close();
  });

  /** A file holding `content` whose checksum verifies (as anyone can make one). */
  async function forged(change: (c: SnapshotContent) => SnapshotContent): Promise<Buffer> {
    const c = change(structuredClone(saved));
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

  const restore = async (file: Buffer) => {
    const res = await fetch(`${d.url}/v1/snapshot`, {
      method: 'PUT',
      headers: { 'X-Service-Token': d.management, Accept: 'application/json' },
      body: file,
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  const token = (over: Partial<TokenRecord>): TokenRecord => ({
    ...(saved.tokens.find((t) => t.Description === 'Initial Management Token') as TokenRecord),
    AccessorID: '5f0c1d8e-1111-4222-8333-944455556666',
    SecretID: '5f0c1d8e-aaaa-4bbb-8ccc-9ddddeeeeeee',
    Description: 'forged',
    Policies: [],
    ...over,
  });

  it('a policy that shows acl = "read" but carries global-management\'s Hash grants read only: the Hash is recomputed, no cache trusts it', async () => {
    const management = saved.policies.find((p) => p.ID === GLOBAL_MANAGEMENT_POLICY_ID) as PolicyRecord;
    const file = await forged((c) => {
      const reader = c.policies.find((p) => p.Name === 'reader') as PolicyRecord;
      reader.Hash = management.Hash;
      c.tokens.push(token({ Policies: [{ ID: reader.ID }] }));
      return c;
    });
    // Warm whatever the daemon caches for global-management first.
    expect((await d.api('GET', '/v1/acl/token/self')).status).toBe(200);
    const restored = await restore(file);
    expect(restored.status).toBe(200);
    const forger = (await d.api('GET', '/v1/acl/token/self', { token: '5f0c1d8e-aaaa-4bbb-8ccc-9ddddeeeeeee' })).body as {
      Policies: Array<{ Name: string }>;
    };
    expect(forger.Policies.map((p) => p.Name)).toEqual(['reader']);
    const escalate = await d.api('PUT', '/v1/acl/token', {
      token: '5f0c1d8e-aaaa-4bbb-8ccc-9ddddeeeeeee',
      body: { Policies: [{ ID: GLOBAL_MANAGEMENT_POLICY_ID }] },
    });
    expect(escalate.status).toBe(403);
    const reader = (await d.api('GET', '/v1/acl/policy/name/reader')).body as PolicyRecord;
    expect(reader.Hash).toBe(policyHash(reader));
    expect(reader.Hash).not.toBe(management.Hash);
  });

  it.each<[string, (c: SnapshotContent) => SnapshotContent, RegExp]>([
    [
      'two tokens with one SecretID',
      (c) => ({ ...c, tokens: [...c.tokens, token({}), token({ AccessorID: '5f0c1d8e-2222-4222-8333-944455556666' })] }),
      /tokens .* and .* have the same SecretID/,
    ],
    [
      "a token whose rotated-out secret is another token's SecretID",
      (c) => ({
        ...c,
        tokens: [
          ...c.tokens,
          token({}),
          token({
            AccessorID: '5f0c1d8e-2222-4222-8333-944455556666',
            SecretID: '5f0c1d8e-bbbb-4bbb-8ccc-9ddddeeeeeee',
            PreviousSecretID: '5f0c1d8e-aaaa-4bbb-8ccc-9ddddeeeeeee',
            PreviousSecretExpirationTime: '2031-01-01T00:00:00Z',
          }),
        ],
      }),
      /tokens .* and .* hold the same secret/,
    ],
    [
      'a rotated-out secret without its end',
      (c) => ({ ...c, tokens: [...c.tokens, token({ PreviousSecretID: '5f0c1d8e-cccc-4bbb-8ccc-9ddddeeeeeee' })] }),
      /PreviousSecretID and PreviousSecretExpirationTime without the other/,
    ],
    [
      'two policies named global-management',
      (c) => ({
        ...c,
        policies: [
          ...c.policies,
          {
            ...(c.policies.find((p) => p.Name === 'reader') as PolicyRecord),
            ID: '6a000000-1111-4222-8333-944455556666',
            Name: 'global-management',
          },
        ],
      }),
      /have the same Name in one namespace/,
    ],
    [
      'an AccessorID that is a path',
      (c) => ({ ...c, tokens: [...c.tokens, token({ AccessorID: '../../etc' })] }),
      /token AccessorID "\.\.\/\.\.\/etc" is not a UUID/,
    ],
    ['no anonymous token', (c) => ({ ...c, tokens: c.tokens.filter((t) => t.SecretID !== 'anonymous') }), /the anonymous token is missing/],
    [
      'no global-management policy',
      (c) => ({ ...c, policies: c.policies.filter((p) => p.ID !== GLOBAL_MANAGEMENT_POLICY_ID) }),
      /the built-in policy global-management .* is missing/,
    ],
    [
      'a built-in policy with other rules',
      (c) => ({ ...c, policies: c.policies.map((p) => (p.ID === GLOBAL_MANAGEMENT_POLICY_ID ? { ...p, Rules: 'acl = "read"' } : p)) }),
      /does not carry its built-in rules/,
    ],
    [
      'rules that do not parse',
      (c) => ({ ...c, policies: c.policies.map((p) => (p.Name === 'reader' ? { ...p, Rules: 'acl = ' } : p)) }),
      /has rules that do not parse/,
    ],
    [
      'a reserved AccessorID',
      (c) => ({ ...c, tokens: [...c.tokens, token({ AccessorID: '00000000-0000-0000-0000-000000000007' })] }),
      /is reserved/,
    ],
    [
      'the anonymous secret on another token',
      (c) => ({ ...c, tokens: [...c.tokens, token({ SecretID: 'anonymous' })] }),
      /has the anonymous token's secret/,
    ],
    ['a namespace that is not a name', (c) => ({ ...c, tokens: [...c.tokens, token({ Namespace: '../x' })] }), /has an invalid Namespace/],
    [
      'a binding rule of a method the snapshot does not hold',
      (c) => ({
        ...c,
        bindingRules: [
          {
            ID: '7b000000-1111-4222-8333-944455556666',
            Description: '',
            AuthMethod: 'nowhere',
            Selector: '',
            BindType: 'service',
            BindName: 'x',
            Namespace: 'default',
            Partition: 'default',
            CreateIndex: 1,
            ModifyIndex: 1,
          },
        ],
      }),
      /belongs to auth method "nowhere"/,
    ],
  ])('refuses %s with 400 and changes nothing', async (_what, change, message) => {
    const before = (await d.api('GET', '/v1/acl/tokens')).headers.get('x-service-index');
    const answer = await restore(await forged(change));
    expect(answer.status).toBe(400);
    expect(answer.body.code).toBe('INVALID_REQUEST');
    expect(answer.body.message).toMatch(message);
    expect(answer.body.message).toMatch(/nothing was restored$/);
    expect(JSON.stringify(answer.body)).not.toContain('5f0c1d8e-aaaa-4bbb-8ccc-9ddddeeeeeee');
    const after = await d.api('GET', '/v1/acl/tokens');
    expect(after.headers.get('x-service-index')).toBe(before);
    expect((await d.api('GET', '/v1/acl/token/self', { token: 'anonymous' })).status).toBe(200);
  });
});
