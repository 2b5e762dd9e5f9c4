import { policyHash } from './hash.js';
import {
  ANONYMOUS_TOKEN_ID,
  ANONYMOUS_TOKEN_SECRET,
  DEFAULT_NAMESPACE,
  DEFAULT_PARTITION,
  GLOBAL_MANAGEMENT_POLICY_ID,
  GLOBAL_READ_ONLY_POLICY_ID,
} from './ids.js';
import { newTokenRecord } from './token.js';
import type { PolicyRecord, TokenRecord } from './types.js';

function builtinRules(level: 'read' | 'write'): string {
  const prefixed = ['agent_prefix', 'event_prefix', 'key_prefix', 'node_prefix', 'query_prefix', 'session_prefix'];
  const lines = [
    `acl = "${level}"`,
    ...prefixed.map((r) => `${r} "" {\n  policy = "${level}"\n}`),
    `keyring = "${level}"`,
    `operator = "${level}"`,
    `mesh = "${level}"`,
    `peering = "${level}"`,
    `service_prefix "" {\n  policy = "${level}"\n  intentions = "${level}"\n}`,
  ];
  return lines.join('\n');
}

export const GLOBAL_MANAGEMENT_RULES = builtinRules('write');
export const GLOBAL_READ_ONLY_RULES = builtinRules('read');

/** The two built-in policies: rules and datacenters immutable, never deletable. */
export const BUILTIN_POLICIES: ReadonlyArray<Pick<PolicyRecord, 'ID' | 'Name' | 'Description' | 'Rules'>> = [
  {
    ID: GLOBAL_MANAGEMENT_POLICY_ID,
    Name: 'global-management',
    Description: 'Builtin Policy that grants unlimited access',
    Rules: GLOBAL_MANAGEMENT_RULES,
  },
  {
    ID: GLOBAL_READ_ONLY_POLICY_ID,
    Name: 'builtin/global-read-only',
    Description: 'Builtin Policy that grants unlimited read-only access to all components',
    Rules: GLOBAL_READ_ONLY_RULES,
  },
];

export const isBuiltinPolicyID = (id: string): boolean => id === GLOBAL_MANAGEMENT_POLICY_ID || id === GLOBAL_READ_ONLY_POLICY_ID;

/** A built-in policy as stored (the store stamps its indexes). */
export function builtinPolicyRecord(p: (typeof BUILTIN_POLICIES)[number]): Omit<PolicyRecord, 'CreateIndex' | 'ModifyIndex'> {
  const base = { ...p, Namespace: DEFAULT_NAMESPACE, Partition: DEFAULT_PARTITION };
  return { ...base, Hash: policyHash(base) };
}

export function anonymousTokenRecord(now: number): Omit<TokenRecord, 'CreateIndex' | 'ModifyIndex'> {
  return newTokenRecord({
    AccessorID: ANONYMOUS_TOKEN_ID,
    SecretID: ANONYMOUS_TOKEN_SECRET,
    content: {
      Description: 'Anonymous Token',
      Policies: [],
      Roles: [],
      ServiceIdentities: [],
      NodeIdentities: [],
      TemplatedPolicies: [],
      Local: false,
    },
    now,
    scope: { Namespace: DEFAULT_NAMESPACE, Partition: DEFAULT_PARTITION },
  });
}
