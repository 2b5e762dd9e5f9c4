import { BUILTIN_POLICIES, isBuiltinPolicyID } from './builtins.js';
import { invalid } from './errors.js';
import { policyHash, roleHash, tokenHash } from './hash.js';
import { ANONYMOUS_TOKEN_ID, ANONYMOUS_TOKEN_SECRET, isReservedID, isUUID } from './ids.js';
import { parsePolicyRules } from './rules/policy.js';
import type { AuthMethodRecord, BindingRuleRecord, PolicyRecord, RoleRecord, TokenRecord } from './types.js';

/**
 * What a restore must hold before it may replace anything (README, "Security"): every invariant the
 * API enforces on writes, since a snapshot file is input like any other (its checksum is
 * unkeyed: anyone can recompute it). Checked whole before any change; the first problem
 * found is refused with 400, naming the record.
 */
export interface RestoreContent {
  tokens: readonly TokenRecord[];
  policies: readonly PolicyRecord[];
  roles: readonly RoleRecord[];
  authMethods: readonly AuthMethodRecord[];
  bindingRules: readonly BindingRuleRecord[];
}

const SCOPE_RE = /^[a-z0-9]([a-z0-9-]{0,62})$/;
const POLICY_NAME_RE = /^[A-Za-z0-9\-_]+\/?[A-Za-z0-9\-_]*$/;
const ROLE_NAME_RE = /^[A-Za-z0-9\-_]{1,256}$/;
const METHOD_NAME_RE = /^[A-Za-z0-9\-_]{1,128}$/;
/** A secret: printable, no spaces, at most 256 characters (UUIDs, and initial management secrets). */
const SECRET_RE = /^[\x21-\x7e]{1,256}$/;

const refuse = (message: string) => invalid(`Invalid snapshot: ${message}; nothing was restored`);

function scope(kind: string, id: string, r: { Namespace: string; Partition: string }): string {
  if (!SCOPE_RE.test(r.Namespace)) throw refuse(`${kind} ${id} has an invalid Namespace ${JSON.stringify(r.Namespace.slice(0, 64))}`);
  if (!SCOPE_RE.test(r.Partition)) throw refuse(`${kind} ${id} has an invalid Partition ${JSON.stringify(r.Partition.slice(0, 64))}`);
  return `${r.Partition}/${r.Namespace}`;
}

function uuid(kind: string, field: string, id: string, reservedAllowed: (id: string) => boolean = () => false): void {
  if (!isUUID(id)) throw refuse(`${kind} ${field} ${JSON.stringify(id.slice(0, 64))} is not a UUID`);
  if (isReservedID(id) && !reservedAllowed(id)) throw refuse(`${kind} ${field} ${id} is reserved`);
}

/** Names must be unique in their scope, compared without case (as on writes). */
function unique(kind: string, seen: Map<string, string>, key: string, id: string, what: string): void {
  const k = key.toLowerCase();
  const other = seen.get(k);
  if (other !== undefined) throw refuse(`${kind} ${id} and ${other} have the same ${what}`);
  seen.set(k, id);
}

/** The global objects: policies (built-ins included, rules parsing), roles, auth methods, binding rules, global tokens (the anonymous one included). */
export function checkGlobalObjects(c: RestoreContent): void {
  const policyNames = new Map<string, string>();
  const policyIDs = new Map<string, string>();
  for (const p of c.policies) {
    uuid('policy', 'ID', p.ID, isBuiltinPolicyID);
    unique('policy', policyIDs, p.ID, p.ID, 'ID');
    const where = scope('policy', p.ID, p);
    const builtin = BUILTIN_POLICIES.find((b) => b.ID === p.ID);
    if (builtin) {
      if (p.Rules !== builtin.Rules) throw refuse(`built-in policy ${p.ID} (${builtin.Name}) does not carry its built-in rules`);
      if (where !== 'default/default') throw refuse(`built-in policy ${p.ID} is not in the default namespace and partition`);
    } else {
      if (p.Name.length < 1 || p.Name.length > 128 || !POLICY_NAME_RE.test(p.Name) || p.Name.toLowerCase().startsWith('builtin/')) {
        throw refuse(`policy ${p.ID} has an invalid Name ${JSON.stringify(p.Name.slice(0, 64))}`);
      }
      try {
        parsePolicyRules(p.Rules);
      } catch (err) {
        throw refuse(`policy ${p.ID} (${p.Name}) has rules that do not parse: ${(err as Error).message}`);
      }
    }
    unique('policy', policyNames, `${where}/${p.Name}`, p.ID, 'Name in one namespace');
  }
  for (const b of BUILTIN_POLICIES) if (!policyIDs.has(b.ID)) throw refuse(`the built-in policy ${b.Name} (${b.ID}) is missing`);

  const roleNames = new Map<string, string>();
  const roleIDs = new Map<string, string>();
  for (const r of c.roles) {
    uuid('role', 'ID', r.ID);
    unique('role', roleIDs, r.ID, r.ID, 'ID');
    if (!ROLE_NAME_RE.test(r.Name)) throw refuse(`role ${r.ID} has an invalid Name ${JSON.stringify(r.Name.slice(0, 64))}`);
    unique('role', roleNames, `${scope('role', r.ID, r)}/${r.Name}`, r.ID, 'Name in one namespace');
  }

  const methods = new Map<string, string>();
  for (const m of c.authMethods) {
    if (!METHOD_NAME_RE.test(m.Name)) throw refuse(`auth method ${JSON.stringify(m.Name.slice(0, 64))} has an invalid Name`);
    unique('auth method', methods, `${scope('auth method', m.Name, m)}/${m.Name}`, m.Name, 'Name in one namespace');
  }
  const ruleIDs = new Map<string, string>();
  for (const r of c.bindingRules) {
    uuid('binding rule', 'ID', r.ID);
    unique('binding rule', ruleIDs, r.ID, r.ID, 'ID');
    if (!methods.has(`${scope('binding rule', r.ID, r)}/${r.AuthMethod}`.toLowerCase()))
      throw refuse(`binding rule ${r.ID} belongs to auth method ${JSON.stringify(r.AuthMethod)}, which the snapshot does not hold`);
  }

  const anonymous = c.tokens.find((t) => t.AccessorID === ANONYMOUS_TOKEN_ID);
  if (!anonymous) throw refuse('the anonymous token is missing');
  if (anonymous.SecretID !== ANONYMOUS_TOKEN_SECRET || anonymous.Local)
    throw refuse('the anonymous token must be global with the secret "anonymous"');
  checkTokens(c.tokens.filter((t) => !t.Local));
}

/**
 * Tokens: AccessorIDs UUIDs (only the anonymous token's is reserved), secrets printable and
 * no longer than 256 characters (the anonymous one "anonymous"), both unique among
 * `tokens` (pass every token that will be held together).
 */
export function checkTokens(tokens: readonly TokenRecord[]): void {
  const accessors = new Map<string, string>();
  const secrets = new Map<string, string>();
  for (const t of tokens) {
    uuid('token', 'AccessorID', t.AccessorID, (id) => id === ANONYMOUS_TOKEN_ID && !t.Local);
    if (t.AccessorID !== ANONYMOUS_TOKEN_ID && t.SecretID === ANONYMOUS_TOKEN_SECRET)
      throw refuse(`token ${t.AccessorID} has the anonymous token's secret`);
    if (!SECRET_RE.test(t.SecretID)) throw refuse(`token ${t.AccessorID} has an invalid SecretID`);
    scope('token', t.AccessorID, t);
    if (accessors.has(t.AccessorID)) throw refuse(`two tokens have the AccessorID ${t.AccessorID}`);
    accessors.set(t.AccessorID, t.AccessorID);
    // Never named in the message: the secret itself.
    const other = secrets.get(t.SecretID);
    if (other !== undefined) throw refuse(`tokens ${other} and ${t.AccessorID} have the same SecretID`);
    secrets.set(t.SecretID, t.AccessorID);
  }
}

/** The records with every Hash computed from their content: a stored hash is never taken on trust. */
export function withRecomputedHashes<C extends RestoreContent>(c: C): C {
  return {
    ...c,
    tokens: c.tokens.map((t) => ({ ...t, Hash: tokenHash(t) })),
    policies: c.policies.map((p) => ({ ...p, Hash: policyHash(p) })),
    roles: c.roles.map((r) => ({ ...r, Hash: roleHash(r) })),
  };
}
