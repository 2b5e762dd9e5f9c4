import { describe, expect, it } from 'vitest';
import { GLOBAL_MANAGEMENT_RULES, GLOBAL_READ_ONLY_RULES } from '../../src/domain/builtins.js';
import { type ApplicablePolicy, Authorizer, type DefaultPolicy } from '../../src/domain/rules/authorizer.js';
import type { Access } from '../../src/domain/rules/decisions.js';
import { parsePolicyRules } from '../../src/domain/rules/policy.js';
import { explain } from '../../src/domain/rules/explain.js';
import { syntheticPolicies } from '../../src/domain/templates.js';

/**
 * Decisions on every resource, with Consul's semantics (the facts of its `acl` package:
 * policy_authorizer.go, policy_merger.go, the builtin policies and identities). Each group
 * is one token; each row one decision, named by what it shows.
 */

interface PolicySpec {
  rules: string;
  namespace?: string;
  partition?: string;
  builtin?: boolean;
}

interface Group {
  name: string;
  policies: Array<string | PolicySpec>;
  defaultPolicy?: DefaultPolicy;
  /** The token's namespace and partition. */
  token?: { namespace: string; partition: string };
  /** [what it shows, "resource segment access [@partition/namespace]", allowed?] */
  decisions: Array<[string, string, boolean]>;
}

const serviceIdentity = (name: string): string =>
  syntheticPolicies({ ServiceIdentities: [{ ServiceName: name }], NodeIdentities: [], TemplatedPolicies: [] })[0]?.Rules ?? '';
const nodeIdentity = (name: string): string =>
  syntheticPolicies({ ServiceIdentities: [], NodeIdentities: [{ NodeName: name, Datacenter: 'dc1' }], TemplatedPolicies: [] })[0]?.Rules ??
  '';
const template = (name: string, variable?: string): string =>
  syntheticPolicies({
    ServiceIdentities: [],
    NodeIdentities: [],
    TemplatedPolicies: [{ TemplateName: name, ...(variable ? { TemplateVariables: { name: variable } } : {}) }],
  })[0]?.Rules ?? '';

const GROUPS: Group[] = [
  {
    name: 'no rules, default deny',
    policies: [],
    decisions: [
      ['denies service read', 'service web read', false],
      ['denies key read', 'key a/b read', false],
      ['denies key list', 'key a/ list', false],
      ['denies node write', 'node n1 write', false],
      ['denies operator read', 'operator - read', false],
      ['denies mesh read', 'mesh - read', false],
      ['denies keyring read', 'keyring - read', false],
      ['denies acl read', 'acl - read', false],
      ['denies intention read', 'intention web read', false],
      ['denies agent read', 'agent n1 read', false],
    ],
  },
  {
    name: 'no rules, default allow',
    policies: [],
    defaultPolicy: 'allow',
    decisions: [
      ['allows service write', 'service web write', true],
      ['allows key write', 'key a/b write', true],
      ['allows key list', 'key a/ list', true],
      ['allows key write-prefix', 'key a/ write-prefix', true],
      ['allows session write', 'session n1 write', true],
      ['allows event write', 'event deploy write', true],
      ['allows query write', 'query q write', true],
      ['allows intention write', 'intention web write', true],
      ['allows operator write', 'operator - write', true],
      ['allows peering write (through operator)', 'peering - write', true],
      ['allows keyring write', 'keyring - write', true],
      ['lets acl be read', 'acl - read', true],
      ['never grants acl management by default', 'acl - write', false],
    ],
  },
  {
    name: 'an exact service rule',
    policies: ['service "web" { policy = "write" }'],
    decisions: [
      ['write grants write', 'service web write', true],
      ['write grants read', 'service web read', true],
      ['is exact: web2 falls to the default', 'service web2 read', false],
      ['is exact: "we" is not matched', 'service we read', false],
      ['is case-sensitive', 'service Web read', false],
      ['says nothing about nodes', 'node web read', false],
    ],
  },
  {
    name: 'a read rule under default allow',
    policies: ['service "web" { policy = "read" }', 'key_prefix "ro/" { policy = "read" }'],
    defaultPolicy: 'allow',
    decisions: [
      ['read grants read', 'service web read', true],
      ['read denies write, even under allow', 'service web write', false],
      ['a key read rule denies list', 'key ro/x list', false],
      ['a key read rule denies write', 'key ro/x write', false],
      ['other names fall to allow', 'service api write', true],
      ['other keys fall to allow', 'key rw/x write', true],
    ],
  },
  {
    name: 'exact beats prefix',
    policies: [
      'service_prefix "" { policy = "read" }\nservice "web" { policy = "write" }\nservice_prefix "we" { policy = "deny" }\nservice "wet" { policy = "read" }',
    ],
    decisions: [
      ['the exact rule writes', 'service web write', true],
      ['a longer deny prefix loses to an exact rule', 'service web read', true],
      ['the exact read rule beats the deny prefix', 'service wet read', true],
      ['the deny prefix covers the rest of "we"', 'service west read', false],
      ['the empty prefix reads everything else', 'service api read', true],
      ['the empty prefix does not write', 'service api write', false],
      ['the empty prefix matches the empty name', 'service  read', true],
    ],
  },
  {
    name: 'the longest prefix wins',
    policies: [
      'key_prefix "" { policy = "read" }\nkey_prefix "foo/" { policy = "write" }\nkey_prefix "foo/bar/" { policy = "deny" }\nkey_prefix "foo/bar/baz/" { policy = "list" }',
    ],
    decisions: [
      ['"" reads', 'key zip read', true],
      ['"" does not write', 'key zip write', false],
      ['"foo/" writes', 'key foo/x write', true],
      ['"foo/bar/" denies read', 'key foo/bar/x read', false],
      ['"foo/bar/baz/" lists under the deny', 'key foo/bar/baz/q list', true],
      ['"foo/bar/baz/" reads under the deny', 'key foo/bar/baz/q read', true],
      ['list does not write', 'key foo/bar/baz/q write', false],
      ['"foo/bar" is not under "foo/bar/"', 'key foo/bar write', true],
      ['a prefix covers the name equal to it', 'key foo/ write', true],
      ['"foo" is not under "foo/"', 'key foo write', false],
    ],
  },
  {
    name: 'key access levels',
    policies: ['key "r" { policy = "read" }\nkey "l" { policy = "list" }\nkey "w" { policy = "write" }\nkey "d" { policy = "deny" }'],
    defaultPolicy: 'allow',
    decisions: [
      ['read reads', 'key r read', true],
      ['read does not list', 'key r list', false],
      ['list reads', 'key l read', true],
      ['list lists', 'key l list', true],
      ['list does not write', 'key l write', false],
      ['write lists', 'key w list', true],
      ['write writes', 'key w write', true],
      ['deny denies read under allow', 'key d read', false],
      ['deny denies list', 'key d list', false],
      ['an exact key rule is not a prefix', 'key rr write', true],
    ],
  },
  {
    name: 'key write-prefix',
    policies: [
      'key_prefix "app/" { policy = "write" }\nkey "app/locked" { policy = "read" }\nkey_prefix "tmp/" { policy = "write" }\nkey_prefix "ro/" { policy = "read" }',
    ],
    decisions: [
      ['a rule under the prefix that is not write denies', 'key app/ write-prefix', false],
      ['a narrower prefix without such rules is allowed', 'key app/x/ write-prefix', true],
      ['all write under the prefix allows', 'key tmp/ write-prefix', true],
      ['the covering prefix rule not write denies', 'key ro/ write-prefix', false],
      ['no covering rule and no rule under it: default', 'key other/ write-prefix', false],
      ['"" covers rules that are not write', 'key  write-prefix', false],
      ['plain write still follows the exact rule', 'key app/locked write', false],
    ],
  },
  {
    name: 'rules of different policies merge first',
    policies: [
      'service "web" { policy = "read" }\nkey_prefix "a/" { policy = "list" }\nservice_prefix "" { policy = "deny" }\nnode "n1" { policy = "write" }',
      'service "web" { policy = "write" }\nkey_prefix "a/" { policy = "read" }\nservice "api" { policy = "read" }\nnode "n1" { policy = "deny" }',
      'key_prefix "b/" { policy = "list" }',
      'key_prefix "b/" { policy = "write" }',
    ],
    decisions: [
      ['write beats read for the same name', 'service web write', true],
      ['list beats read for the same prefix', 'key a/x list', true],
      ['the merged list still does not write', 'key a/x write', false],
      ['an exact rule of one policy beats a deny prefix of another', 'service api read', true],
      ['the deny prefix holds for other names', 'service db read', false],
      ['deny beats write for the same name', 'node n1 read', false],
      ['write beats list for the same prefix', 'key b/x write', true],
    ],
  },
  {
    name: 'an exact rule and a prefix for the same name',
    policies: ['key "a" { policy = "read" }', 'key_prefix "a" { policy = "write" }'],
    decisions: [
      ['the exact rule decides the name itself', 'key a write', false],
      ['it reads', 'key a read', true],
      ['the prefix decides longer names', 'key ab write', true],
    ],
  },
  {
    name: 'intentions from service rules',
    policies: [
      'service "r" { policy = "read" }\nservice "w" { policy = "write" }\nservice "d" { policy = "deny" }\nservice "i" {\n  policy = "read"\n  intentions = "write"\n}\nservice "x" {\n  policy = "write"\n  intentions = "deny"\n}\nservice_prefix "p-" { policy = "read" }\nservice_prefix "wp-" {\n  policy = "write"\n  intentions = "write"\n}\nservice "wp-db" { policy = "read" }',
    ],
    decisions: [
      ['a read service rule reads intentions', 'intention r read', true],
      ['a read service rule does not write intentions', 'intention r write', false],
      ['a write service rule only reads intentions', 'intention w read', true],
      ['a write service rule does not write intentions', 'intention w write', false],
      ['a deny service rule denies intentions', 'intention d read', false],
      ['intentions = write writes intentions', 'intention i write', true],
      ['intentions = write leaves the service read-only', 'service i write', false],
      ['intentions = deny denies intentions', 'intention x read', false],
      ['intentions = deny leaves the service writable', 'service x write', true],
      ['a prefix rule reads intentions under it', 'intention p-web read', true],
      ['a prefix rule with intentions writes them', 'intention wp-api write', true],
      ['an exact service rule without intentions beats the prefix', 'intention wp-db write', false],
      ['and reads them', 'intention wp-db read', true],
      ['no service rule: default', 'intention other read', false],
    ],
  },
  {
    name: 'intentions merged across policies',
    policies: [
      'service "web" { policy = "read" }',
      'service "web" { intentions = "write" }',
      'service "api" { policy = "write" }',
      'service "api" { policy = "deny" }',
    ],
    defaultPolicy: 'allow',
    decisions: [
      ['the explicit intentions of one policy apply to the merged rule', 'intention web write', true],
      ['the service stays read', 'service web write', false],
      ['a merged deny policy derives intention deny', 'intention api read', false],
      ['unruled services fall to allow', 'intention db write', true],
    ],
  },
  {
    name: 'other segmented resources',
    policies: [
      'agent "n1" { policy = "write" }\nagent_prefix "" { policy = "read" }\nevent_prefix "deploy-" { policy = "write" }\nevent "audit" { policy = "read" }\nquery_prefix "" { policy = "read" }\nquery "mine" { policy = "write" }\nsession_prefix "n" { policy = "write" }\nsession "nx" { policy = "deny" }\nnode_prefix "web-" { policy = "read" }',
    ],
    decisions: [
      ['agent exact writes', 'agent n1 write', true],
      ['agent prefix reads others', 'agent n2 read', true],
      ['agent prefix does not write', 'agent n2 write', false],
      ['event prefix writes', 'event deploy-web write', true],
      ['event exact reads', 'event audit read', true],
      ['event exact does not write', 'event audit write', false],
      ['event without rule: default', 'event other read', false],
      ['query prefix reads', 'query any read', true],
      ['query exact writes', 'query mine write', true],
      ['query prefix does not write', 'query yours write', false],
      ['session prefix writes', 'session n1 write', true],
      ['session exact deny beats the prefix', 'session nx read', false],
      ['session outside the prefix: default', 'session m1 read', false],
      ['node prefix reads', 'node web-1 read', true],
      ['node prefix does not write', 'node web-1 write', false],
    ],
  },
  {
    name: 'operator, mesh, peering and keyring',
    policies: ['operator = "read"\nkeyring = "write"'],
    decisions: [
      ['operator read', 'operator - read', true],
      ['operator read does not write', 'operator - write', false],
      ['mesh without a rule follows operator: read', 'mesh - read', true],
      ['mesh without a rule follows operator: no write', 'mesh - write', false],
      ['peering without a rule follows operator', 'peering - read', true],
      ['keyring write', 'keyring - write', true],
    ],
  },
  {
    name: 'mesh and peering with rules of their own',
    policies: ['operator = "write"\nmesh = "read"\npeering = "deny"'],
    defaultPolicy: 'allow',
    decisions: [
      ['operator write', 'operator - write', true],
      ['mesh rule read beats operator write', 'mesh - write', false],
      ['mesh reads', 'mesh - read', true],
      ['peering deny beats operator and the default', 'peering - read', false],
      ['keyring does not follow operator: default', 'keyring - write', true],
    ],
  },
  {
    name: 'keyring does not follow operator',
    policies: ['operator = "write"'],
    decisions: [
      ['operator writes', 'operator - write', true],
      ['keyring falls to the default', 'keyring - read', false],
      ['peering follows operator', 'peering - write', true],
    ],
  },
  {
    name: 'acl',
    policies: ['acl = "read"'],
    decisions: [
      ['acl read', 'acl - read', true],
      ['acl read does not write', 'acl - write', false],
    ],
  },
  {
    name: 'acl deny across policies',
    policies: ['acl = "write"', 'acl = "deny"'],
    defaultPolicy: 'allow',
    decisions: [
      ['deny beats write', 'acl - write', false],
      ['deny denies read under allow', 'acl - read', false],
    ],
  },
  {
    name: 'a service identity "web"',
    policies: [serviceIdentity('web')],
    decisions: [
      ['writes its service', 'service web write', true],
      ['writes its sidecar proxy', 'service web-sidecar-proxy write', true],
      ['reads every service', 'service db read', true],
      ['writes no other service', 'service db write', false],
      ['reads every node', 'node n1 read', true],
      ['writes no node', 'node n1 write', false],
      ['reads intentions of its service', 'intention web read', true],
      ['does not write intentions', 'intention web write', false],
      ['reads nothing in the KV store', 'key a read', false],
      ['has no acl', 'acl - read', false],
      ['has no operator', 'operator - read', false],
    ],
  },
  {
    name: 'a node identity "n1"',
    policies: [nodeIdentity('n1')],
    decisions: [
      ['writes its node', 'node n1 write', true],
      ['writes no other node', 'node n2 write', false],
      ['reads no other node', 'node n2 read', false],
      ['reads every service', 'service api read', true],
      ['writes no service', 'service api write', false],
    ],
  },
  {
    name: 'templated policies',
    policies: [template('builtin/dns'), template('builtin/service', 'api')],
    decisions: [
      ['dns reads queries', 'query q1 read', true],
      ['dns reads nodes', 'node n9 read', true],
      ['dns writes no query', 'query q1 write', false],
      ['builtin/service writes its service', 'service api write', true],
      ['builtin/service writes its sidecar', 'service api-sidecar-proxy write', true],
      ['builtin/service writes no other', 'service web write', false],
    ],
  },
  {
    name: 'builtin/nomad-server',
    policies: [template('builtin/nomad-server')],
    decisions: [
      ['writes acl', 'acl - write', true],
      ['writes services', 'service any write', true],
      ['reads agents', 'agent n1 read', true],
      ['writes no agent', 'agent n1 write', false],
      ['reads nodes', 'node n1 read', true],
    ],
  },
  {
    name: 'global-management',
    policies: [{ rules: GLOBAL_MANAGEMENT_RULES, builtin: true }],
    decisions: [
      ['writes acl', 'acl - write', true],
      ['writes services', 'service anything write', true],
      ['writes intentions', 'intention anything write', true],
      ['writes keys', 'key any/key write', true],
      ['lists keys', 'key any/ list', true],
      ['write-prefixes the whole KV store', 'key  write-prefix', true],
      ['writes nodes', 'node n write', true],
      ['writes agents', 'agent n write', true],
      ['writes sessions', 'session n write', true],
      ['writes events', 'event e write', true],
      ['writes queries', 'query q write', true],
      ['writes operator', 'operator - write', true],
      ['writes mesh', 'mesh - write', true],
      ['writes peering', 'peering - write', true],
      ['writes keyring', 'keyring - write', true],
      ['applies in other namespaces', 'service web write @default/team', true],
    ],
  },
  {
    name: 'global-management with a deny policy',
    policies: [
      { rules: GLOBAL_MANAGEMENT_RULES, builtin: true },
      'service "secret" { policy = "deny" }\nkey_prefix "" { policy = "deny" }',
    ],
    decisions: [
      ['a deny merged with it wins for its name', 'service secret read', false],
      ['other services still write', 'service web write', true],
      ['a deny on the same prefix wins', 'key a read', false],
    ],
  },
  {
    name: 'builtin/global-read-only',
    policies: [{ rules: GLOBAL_READ_ONLY_RULES, builtin: true }],
    decisions: [
      ['reads acl', 'acl - read', true],
      ['does not write acl', 'acl - write', false],
      ['reads services', 'service web read', true],
      ['does not write services', 'service web write', false],
      ['reads intentions', 'intention web read', true],
      ['reads keys', 'key a read', true],
      ['does not list keys (read is not list)', 'key a/ list', false],
      ['reads operator', 'operator - read', true],
      ['does not write operator', 'operator - write', false],
      ['reads mesh', 'mesh - read', true],
    ],
  },
  {
    name: 'a token of namespace "team"',
    policies: [
      { rules: 'service_prefix "" { policy = "write" }\nkey_prefix "" { policy = "read" }', namespace: 'team' },
      'namespace "other" { service_prefix "" { policy = "write" } }',
    ],
    token: { namespace: 'team', partition: 'default' },
    decisions: [
      ['its policy applies in its namespace', 'service web write @default/team', true],
      ['and reads keys there', 'key a read @default/team', true],
      ['its policy does not apply in default', 'service web read @default/default', false],
      ["namespace blocks are administrators' grants: none for it", 'service web read @default/other', false],
      ['no operator for tokens outside the default namespace', 'operator - read', false],
    ],
  },
  {
    name: 'namespace and partition blocks for an administrator',
    policies: [
      'service "home" { policy = "write" }\nnamespace "team" {\n  service "web" { policy = "write" }\n}\nnamespace_prefix "te" {\n  key_prefix "" { policy = "read" }\n}\npartition "p1" {\n  node_prefix "" { policy = "read" }\n  namespace "n1" {\n    service "s" { policy = "write" }\n  }\n}',
    ],
    decisions: [
      ['a namespace block grants in its namespace', 'service web write @default/team', true],
      ['not in the default namespace', 'service web write @default/default', false],
      ['the top-level rules apply at home', 'service home write @default/default', true],
      ['the top-level rules do not apply in team', 'service home read @default/team', false],
      ['the exact namespace block wins over the prefix block', 'key a read @default/team', false],
      ['a namespace_prefix block grants where it matches', 'key a read @default/tech', true],
      ['not where it does not', 'key a read @default/tx', false],
      ['a namespace inside a partition block', 'service s write @p1/n1', true],
      ['not in another namespace of the partition', 'service s write @p1/default', false],
      ['partition-level rules apply in all its namespaces', 'node n read @p1/n1', true],
      ['and in its default namespace', 'node n read @p1/default', true],
      ['not in another partition', 'node n read @p2/default', false],
    ],
  },
  {
    name: 'many prefixes of many lengths',
    policies: [
      Array.from({ length: 40 }, (_, i) => `key_prefix "${'k/'.repeat(i + 1)}" { policy = "${i % 2 === 0 ? 'write' : 'read'}" }`).join(
        '\n',
      ),
    ],
    decisions: [
      ['the deepest matching prefix decides (depth 40, read)', `key ${'k/'.repeat(40)}x write`, false],
      ['depth 39 writes', `key ${'k/'.repeat(39)}x write`, true],
      ['depth 1 writes', 'key k/x write', true],
      ['depth 2 reads', 'key k/k/x read', true],
      ['depth 2 does not write', 'key k/k/x write', false],
      ['outside every prefix: default', 'key j/x read', false],
    ],
  },
  {
    name: 'odd segments',
    policies: ['service "ünïcode" { policy = "write" }\nkey_prefix "a b/" { policy = "write" }\nservice_prefix "x" { policy = "read" }'],
    decisions: [
      ['a Unicode name matches exactly', 'service ünïcode write', true],
      ['a similar ASCII name does not', 'service unicode write', false],
      ['a prefix with a space', 'key a%20b/c write', true],
      ['a very long name under a prefix', `service x${'y'.repeat(2000)} read`, true],
    ],
  },
];

function authorizerOf(group: Group): Authorizer {
  const policies: ApplicablePolicy[] = group.policies.map((p) => {
    const spec = typeof p === 'string' ? { rules: p } : p;
    return {
      rules: parsePolicyRules(spec.rules),
      namespace: spec.namespace ?? 'default',
      partition: spec.partition ?? 'default',
      builtin: spec.builtin ?? false,
    };
  });
  const token = group.token ?? { namespace: 'default', partition: 'default' };
  return new Authorizer(token.namespace, token.partition, policies, group.defaultPolicy ?? 'deny');
}

/** "service web write @p/ns": `-` is no segment, %20 a space. */
function parseCheck(text: string, token: { namespace: string; partition: string }) {
  const [resource, segment, access, place] = text.split(' ') as [string, string, Access, string | undefined];
  const [partition, namespace] = place ? (place.slice(1).split('/') as [string, string]) : [token.partition, token.namespace];
  return { resource, segment: segment === '-' ? '' : segment.replaceAll('%20', ' '), access, partition, namespace };
}

const rows = GROUPS.flatMap((g) => g.decisions.map(([what, check, allowed]) => ({ group: g, what, check, allowed })));

describe('authorization decisions, as Consul decides them', () => {
  it('covers at least 150 decisions', () => {
    expect(rows.length).toBeGreaterThanOrEqual(150);
  });

  describe.each(GROUPS.map((g) => [g.name, g] as const))('%s', (_name, group) => {
    const authz = authorizerOf(group);
    it.each(group.decisions)('%s (%s → %s)', (_what, check, allowed) => {
      const c = parseCheck(check, group.token ?? { namespace: 'default', partition: 'default' });
      expect(authz.allows(c.resource, c.segment, c.access, c.partition, c.namespace)).toBe(allowed);
      // The explanation walks the same rules: its answer is the decision's.
      expect(explain(authz, c.resource, c.segment, c.access, c.partition, c.namespace).allow).toBe(allowed);
    });
  });
});
