import { type Body, type Position, RulesSyntaxError, type Value, parseRulesSyntax } from './syntax.js';

/** Access levels of Consul's rule language. `list` exists only for keys. */
export type AccessLevel = 'read' | 'write' | 'deny' | 'list';

/** A rule on a named resource (`service "web" { policy = "write" }`). */
export interface ResourceRule {
  /** Resource kind, e.g. `service_prefix`. */
  resource: string;
  /** The label: a name, or a prefix for `*_prefix` kinds. */
  segment: string;
  /** Access to the resource itself; absent when the block sets only intentions. */
  policy?: AccessLevel;
  /** Intentions access, services only. */
  intentions?: AccessLevel;
}

/** Rules that apply within one scope (the policy's own, a namespace block, a partition block). */
export interface ScopeRules {
  /** The `acl` resource: the only one watchword enforces. */
  acl?: AccessLevel;
  /** Top-level single-value resources other than acl (keyring, operator, mesh, peering). */
  flags: Record<string, AccessLevel>;
  /** Named and prefixed resource rules; parsed, validated and stored, not enforced. */
  resources: ResourceRule[];
  /** `namespace "x" {}` / `namespace_prefix "p" {}` blocks (default-namespace policies only). */
  namespaces: ScopedBlock[];
  /** `partition "x" {}` / `partition_prefix "p" {}` blocks. */
  partitions: ScopedBlock[];
}

export interface ScopedBlock {
  name: string;
  /** True for `*_prefix` blocks: the name is a prefix. */
  prefix: boolean;
  rules: ScopeRules;
}

export class PolicyRulesError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PolicyRulesError';
  }
}

const FLAG_RESOURCES = new Set(['acl', 'keyring', 'operator', 'mesh', 'peering']);
const LABELLED_RESOURCES = new Set([
  'agent',
  'agent_prefix',
  'event',
  'event_prefix',
  'identity',
  'identity_prefix',
  'key',
  'key_prefix',
  'node',
  'node_prefix',
  'query',
  'query_prefix',
  'service',
  'service_prefix',
  'session',
  'session_prefix',
]);
const WITH_INTENTIONS = new Set(['service', 'service_prefix', 'identity', 'identity_prefix']);
const WITH_LIST = new Set(['key', 'key_prefix']);

const at = (pos: Position): string => ` (at ${pos.line}:${pos.column})`;

function accessValue(resource: string, value: Value, pos: Position, allowList: boolean): AccessLevel {
  if (value === 'read' || value === 'write' || value === 'deny' || (allowList && value === 'list')) return value;
  throw new PolicyRulesError(`Invalid ${resource} policy: ${JSON.stringify(value)}${at(pos)}`);
}

function emptyScope(): ScopeRules {
  return { flags: {}, resources: [], namespaces: [], partitions: [] };
}

type Level = 'top' | 'partition' | 'namespace';

function interpret(body: Body, level: Level): ScopeRules {
  const scope = emptyScope();
  const seen = new Set<string>();
  for (const attr of body.attributes) {
    if (!FLAG_RESOURCES.has(attr.key)) {
      const hint = LABELLED_RESOURCES.has(attr.key) ? `; ${attr.key} rules are blocks: ${attr.key} "<name>" { policy = "read" }` : '';
      throw new PolicyRulesError(`Invalid ACL rules: unknown key ${JSON.stringify(attr.key)}${hint}${at(attr.pos)}`);
    }
    if (seen.has(attr.key)) throw new PolicyRulesError(`Invalid ACL rules: ${attr.key} is set more than once${at(attr.pos)}`);
    seen.add(attr.key);
    const access = accessValue(attr.key, attr.value, attr.pos, false);
    if (attr.key === 'acl') scope.acl = access;
    else scope.flags[attr.key] = access;
  }
  for (const block of body.blocks) {
    if (block.type === 'namespace' || block.type === 'namespace_prefix') {
      if (level === 'namespace')
        throw new PolicyRulesError(`Invalid ACL rules: ${block.type} blocks cannot be nested in a namespace${at(block.pos)}`);
      scope.namespaces.push({ name: block.label, prefix: block.type.endsWith('_prefix'), rules: interpret(block.body, 'namespace') });
      continue;
    }
    if (block.type === 'partition' || block.type === 'partition_prefix') {
      if (level !== 'top') throw new PolicyRulesError(`Invalid ACL rules: ${block.type} blocks must be at the top level${at(block.pos)}`);
      scope.partitions.push({ name: block.label, prefix: block.type.endsWith('_prefix'), rules: interpret(block.body, 'partition') });
      continue;
    }
    if (!LABELLED_RESOURCES.has(block.type)) {
      const hint = FLAG_RESOURCES.has(block.type) ? `; write ${block.type} = "read"` : '';
      throw new PolicyRulesError(`Invalid ACL rules: unknown resource ${JSON.stringify(block.type)}${hint}${at(block.pos)}`);
    }
    let policy: AccessLevel | undefined;
    let intentions: AccessLevel | undefined;
    for (const attr of block.body.attributes) {
      if (attr.key === 'policy') {
        policy = accessValue(block.type, attr.value, attr.pos, WITH_LIST.has(block.type));
      } else if (attr.key === 'intentions' && WITH_INTENTIONS.has(block.type)) {
        intentions = accessValue(`${block.type} intentions`, attr.value, attr.pos, false);
      } else {
        throw new PolicyRulesError(
          `Invalid ACL rules: unknown key ${JSON.stringify(attr.key)} in ${block.type} ${JSON.stringify(block.label)}${at(attr.pos)}`,
        );
      }
    }
    const nested = block.body.blocks[0];
    if (nested)
      throw new PolicyRulesError(
        `Invalid ACL rules: unexpected block ${JSON.stringify(nested.type)} in ${block.type} ` +
          `${JSON.stringify(block.label)}${at(nested.pos)}`,
      );
    if (policy === undefined && intentions === undefined) {
      throw new PolicyRulesError(
        `Invalid ${block.type} policy: ${block.type} ${JSON.stringify(block.label)} sets no policy${at(block.pos)}`,
      );
    }
    scope.resources.push({
      resource: block.type,
      segment: block.label,
      ...(policy ? { policy } : {}),
      ...(intentions ? { intentions } : {}),
    });
  }
  return scope;
}

/**
 * Parses and validates policy rules (HCL or JSON). Throws PolicyRulesError with a
 * message naming the problem and its line and column.
 */
export function parsePolicyRules(rules: string): ScopeRules {
  let body: Body;
  try {
    body = parseRulesSyntax(rules);
  } catch (err) {
    if (err instanceof RulesSyntaxError) throw new PolicyRulesError(`Failed to parse ACL rules: ${err.message}`);
    throw err;
  }
  return interpret(body, 'top');
}
