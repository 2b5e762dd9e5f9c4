import { describe, expect, it } from 'vitest';
import { formatAuthMethod, formatBindingRule } from '../../src/cli/auth.js';
import { formatPrimary, formatPromotion, formatServers } from '../../src/cli/operator.js';
import {
  formatPolicy,
  formatPolicyList,
  formatReplication,
  formatRole,
  formatRoleList,
  formatToken,
  formatTokenList,
} from '../../src/cli/output.js';

// The CLI's human output, byte for byte, against files in golden/ (a change in wording or
// alignment shows as a diff of the file; `vitest -u` rewrites them when it is meant). Without
// -meta no object shows its Hash or indices; with it every object shows the same rows.
const token = {
  AccessorID: '6a1253d2-1785-24fd-91c2-f8e78c745511',
  SecretID: '45a3bd52-07c7-47a4-52fd-0745e0cfe967',
  Description: 'Agent token for "node1"',
  Policies: [{ ID: '165d4317-e379-f732-ce70-86278c4558f7', Name: 'node1-write' }],
  Roles: [{ ID: '5e52a099-4c90-c067-5478-980f06be9af5', Name: 'node-read' }],
  ServiceIdentities: [{ ServiceName: 'web', Datacenters: ['dc1'] }],
  NodeIdentities: [{ NodeName: 'node-1', Datacenter: 'dc2' }],
  TemplatedPolicies: [{ TemplateName: 'builtin/service', TemplateVariables: { name: 'api' } }],
  Local: false,
  CreateTime: '2026-11-24T10:00:00.000000000Z',
  ExpirationTime: '2026-11-25T10:00:00Z',
  Hash: 'UuiRkOQPRCvoRZHRtUxxbrmwZ5crYrOdZ0Z1FTFbTbA=',
  Namespace: 'default',
  Partition: 'default',
  CreateIndex: 59,
  ModifyIndex: 61,
} as const;
const policy = {
  ID: '165d4317-e379-f732-ce70-86278c4558f7',
  Name: 'node1-write',
  Description: 'Grants write on node1',
  Rules: 'node "node1" {\n  policy = "write"\n}\n',
  Datacenters: ['dc1', 'dc2'],
  Hash: 'OtZUUKhInTLEqTPfNSSOYbRiSBKm3c4vI2p6MxZnGWc=',
  Namespace: 'default',
  Partition: 'default',
  CreateIndex: 14,
  ModifyIndex: 14,
} as const;
const role = {
  ID: '5e52a099-4c90-c067-5478-980f06be9af5',
  Name: 'node-read',
  Description: 'Read every node',
  Policies: [{ ID: '165d4317-e379-f732-ce70-86278c4558f7', Name: 'node1-write' }],
  ServiceIdentities: [{ ServiceName: 'db' }],
  NodeIdentities: [],
  TemplatedPolicies: [],
  Hash: 'KvRtx8VJ9xIfa0/9n2rCgTdPiPzU+zhnd56TQ3TSxXg=',
  Namespace: 'default',
  Partition: 'default',
  CreateIndex: 20,
  ModifyIndex: 21,
} as const;

describe('CLI output (golden files)', () => {
  it('a token', async () => {
    await expect(formatToken(token as never)).toMatchFileSnapshot('golden/token.txt');
    await expect(formatToken(token as never, true)).toMatchFileSnapshot('golden/token-meta.txt');
  });
  it('a token list', async () => {
    await expect(
      formatTokenList([
        token,
        {
          ...token,
          AccessorID: '00000000-0000-0000-0000-000000000002',
          Description: 'Anonymous Token',
          Local: true,
          ExpirationTime: undefined,
        },
      ] as never),
    ).toMatchFileSnapshot('golden/token-list.txt');
  });
  it('a policy and a policy list', async () => {
    await expect(formatPolicy(policy as never)).toMatchFileSnapshot('golden/policy.txt');
    await expect(formatPolicy(policy as never, true)).toMatchFileSnapshot('golden/policy-meta.txt');
    await expect(
      formatPolicyList([
        policy,
        {
          ...policy,
          ID: '00000000-0000-0000-0000-000000000001',
          Name: 'global-management',
          Description: 'Builtin Policy that grants unlimited access',
          Datacenters: [],
        },
      ] as never),
    ).toMatchFileSnapshot('golden/policy-list.txt');
  });
  it('a role and a role list', async () => {
    await expect(formatRole(role as never)).toMatchFileSnapshot('golden/role.txt');
    await expect(formatRole(role as never, true)).toMatchFileSnapshot('golden/role-meta.txt');
    await expect(formatRoleList([role] as never)).toMatchFileSnapshot('golden/role-list.txt');
  });
  it('an auth method and a binding rule', async () => {
    const method = {
      Name: 'ci',
      Type: 'jwt',
      DisplayName: 'CI',
      Description: 'CI jobs',
      MaxTokenTTL: '1h0m0s',
      TokenLocality: 'local',
      Config: { JWKSURL: 'https://issuer.example/keys', BoundAudiences: ['watchword'] },
      Namespace: 'default',
      Partition: 'default',
      CreateIndex: 30,
      ModifyIndex: 30,
    };
    await expect(formatAuthMethod(method as never)).toMatchFileSnapshot('golden/auth-method.txt');
    await expect(formatAuthMethod(method as never, true)).toMatchFileSnapshot('golden/auth-method-meta.txt');
    const rule = {
      ID: 'c1f6d4b1-6f2e-4e39-9d7e-0a6a2a3f0b11',
      Description: 'services',
      AuthMethod: 'ci',
      Selector: 'value.service != ""',
      BindType: 'service',
      BindName: '${value.service}',
      Namespace: 'default',
      Partition: 'default',
      CreateIndex: 31,
      ModifyIndex: 31,
    };
    await expect(formatBindingRule(rule as never)).toMatchFileSnapshot('golden/binding-rule.txt');
    await expect(formatBindingRule(rule as never, true)).toMatchFileSnapshot('golden/binding-rule-meta.txt');
  });
  it('replication status and the servers of a datacenter', async () => {
    const status = {
      Enabled: true,
      Running: true,
      SourceDatacenter: 'dc1',
      ReplicationType: 'tokens',
      ReplicatedIndex: 120,
      ReplicatedRoleIndex: 120,
      ReplicatedTokenIndex: 120,
      LastSuccess: '2026-11-24T10:00:01Z',
      LastError: '0001-01-01T00:00:00Z',
      LastErrorMessage: '',
      Connected: true,
      PrimaryIndex: 121,
      LagEntries: 1,
      LastContactMs: 12,
    };
    await expect(formatReplication(status as never)).toMatchFileSnapshot('golden/replication.txt');
    const servers = {
      Datacenter: 'dc1',
      Leader: '10.0.0.1:8500',
      Term: 4,
      SyncSet: ['dc1-server-2'],
      RunningWithoutSyncCopy: false,
      Problem: null,
      Servers: [
        {
          Name: 'dc1-server-1',
          Address: '10.0.0.1:8500',
          Role: 'leader',
          Term: 4,
          AppliedSeq: 900,
          AppliedIndex: 450,
          LagBatches: 0,
          InSyncSet: false,
          Connected: true,
          Registered: true,
        },
        {
          Name: 'dc1-server-2',
          Address: '10.0.0.2:8500',
          Role: 'follower',
          Term: 4,
          AppliedSeq: 900,
          AppliedIndex: 450,
          LagBatches: 0,
          InSyncSet: true,
          Connected: true,
          Registered: true,
        },
        {
          Name: 'dc1-server-3',
          Address: '10.0.0.3:8500',
          Role: 'follower',
          Term: 4,
          AppliedSeq: 870,
          AppliedIndex: 440,
          LagBatches: 30,
          InSyncSet: false,
          Connected: true,
          Registered: true,
        },
        {
          Name: 'dc1-server-4',
          Address: '10.0.0.4:8500',
          Role: 'follower',
          Term: 4,
          AppliedSeq: 0,
          AppliedIndex: null,
          LagBatches: 0,
          InSyncSet: false,
          Connected: false,
          Registered: false,
        },
      ],
      AnsweredBy: 'dc1-server-1',
    };
    await expect(formatServers(servers as never)).toMatchFileSnapshot('golden/servers.txt');
  });

  it('operator primary: at a secondary (last contact shown), and at the primary (none)', async () => {
    const atSecondary = formatPrimary({ Datacenter: 'dc1', Epoch: 2, Index: 1234, LastContact: '2026-11-28T00:40:00.000Z' });
    const atPrimary = formatPrimary({ Datacenter: 'dc1', Epoch: 2, Index: 1300 });
    await expect(`${atSecondary}\n---\n${atPrimary}\n`).toMatchFileSnapshot('golden/primary.txt');
    expect(atPrimary).not.toContain('Last contact');
  });

  it('operator primary promote and transfer: the recovery point and the warning in plain words', async () => {
    const promoted = formatPromotion({
      Datacenter: 'dc2',
      Epoch: 2,
      PreviousPrimary: 'dc1',
      PreviousEpoch: 1,
      LastIndex: 4711,
      LastContact: '2026-11-28T00:40:00.000Z',
      Forced: true,
      Warning:
        'Global writes (tokens, policies, roles, auth methods, binding rules) that dc1 acknowledged after its index 4711 may be lost.',
    });
    const transferred = formatPromotion({
      Datacenter: 'dc1',
      Epoch: 3,
      PreviousPrimary: 'dc2',
      PreviousEpoch: 2,
      LastIndex: 5000,
      Forced: false,
      WritesPausedMs: 120,
      Warning: 'A planned transfer: dc1 took every write dc2 had acknowledged (up to index 5000); nothing was lost.',
    });
    await expect(`${promoted}\n---\n${transferred}\n`).toMatchFileSnapshot('golden/promotion.txt');
  });
});
