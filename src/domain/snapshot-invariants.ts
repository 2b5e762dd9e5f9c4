import { BUILTIN_POLICIES, isBuiltinPolicyID } from './builtins.js';
import { WatchwordError, invalid } from './errors.js';
import {
  type Owner,
  checkDatacenterNames,
  normalizeNodeIdentities,
  normalizeServiceIdentities,
  normalizeTemplatedPolicies,
} from './grants.js';
import { policyHash, roleHash, tokenHash } from './hash.js';
import { ANONYMOUS_TOKEN_ID, ANONYMOUS_TOKEN_SECRET, isReservedID, isUUID } from './ids.js';
import { parsePolicyRules } from './rules/policy.js';
import type { AuthMethodRecord, BindingRuleRecord, PolicyRecord, RoleRecord, TokenRecord } from './types.js';

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

/** A check the API makes, run on a restored record: its 400 becomes the restore's, naming the record. */
function asAPI(what: string, check: () => void): void {
  try {
    check();
  } catch (err) {
    if (err instanceof WatchwordError && err.code === 'INVALID_REQUEST') throw refuse(`${what}: ${err.message}`);
    throw err;
  }
}

/**
 * What a token or role grants, checked by the functions the API checks it with: identity names
 * and datacenters, templated policies known with their variables (a name rendered into rules
 * must be one the API would take), links that are IDs.
 */
function checkGrants(
  owner: Owner,
  id: string,
  r: Pick<TokenRecord, 'ServiceIdentities' | 'NodeIdentities' | 'TemplatedPolicies' | 'Policies'> & { Roles?: TokenRecord['Roles'] },
  local: boolean,
): void {
  asAPI(`${owner} ${id}`, () => {
    normalizeServiceIdentities(r.ServiceIdentities ?? [], owner, local);
    normalizeNodeIdentities(r.NodeIdentities ?? [], owner);
    normalizeTemplatedPolicies(r.TemplatedPolicies ?? [], owner, local);
  });
  for (const l of [...(r.Policies ?? []), ...(r.Roles ?? [])])
    if (!isUUID(l.ID)) throw refuse(`${owner} ${id} links ${JSON.stringify(l.ID.slice(0, 64))}, which is not a UUID`);
}

/** A time field: RFC 3339 as the API writes it. */
function checkTime(what: string, value: string | undefined, required: boolean): void {
  if (value === undefined && !required) return;
  if (typeof value !== 'string' || !/^\d{4}-\d{2}-\d{2}T/.test(value) || Number.isNaN(Date.parse(value)))
    throw refuse(`${what} is not an RFC 3339 time`);
}

/**
 * What needs more than the domain to check (the auth-method verifiers' Config rules, a binding
 * rule's fields against its method): the service passes the functions its API uses.
 */
export interface RestoreHooks {
  /** Throws the API's 400 for a method it would refuse (Type, MaxTokenTTL, TokenLocality, Config). */
  authMethod?(m: AuthMethodRecord): void;
  /** Throws the API's 400 for a rule it would refuse under `method` (BindType, BindName, Selector). */
  bindingRule?(r: BindingRuleRecord, method: AuthMethodRecord): void;
}

/**
 * The checks of a restore, record by record as the file is read (docs/security.md, "Security"): every
 * invariant the API enforces on writes, through the functions the API uses, since a snapshot
 * file is input like any other (its checksum is unkeyed: anyone can recompute it). Uniqueness
 * among the small tables is kept here; among tokens (millions) the caller answers from what it
 * has staged (`TokenLookup`). `finish` checks what needs the whole file: the built-in policies
 * and the anonymous token present, every binding rule's auth method held and the rule valid
 * under it. The first problem is thrown (400), naming the record.
 */
export class RestoreChecks {
  constructor(private readonly hooks: RestoreHooks = {}) {}

  private readonly policyNames = new Map<string, string>();
  private readonly policyIDs = new Map<string, string>();
  private readonly roleNames = new Map<string, string>();
  private readonly roleIDs = new Map<string, string>();
  private readonly methods = new Map<string, AuthMethodRecord>();
  private readonly ruleIDs = new Map<string, string>();
  /** Each binding rule with its method's key, checked once every method has been read. */
  private readonly rules: Array<[BindingRuleRecord, string]> = [];
  private anonymous: TokenRecord | undefined;

  policy(p: PolicyRecord): void {
    uuid('policy', 'ID', p.ID, isBuiltinPolicyID);
    unique('policy', this.policyIDs, p.ID, p.ID, 'ID');
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
    asAPI(`policy ${p.ID}`, () => checkDatacenterNames(p.Datacenters ?? [], 'Policy'));
    unique('policy', this.policyNames, `${where}/${p.Name}`, p.ID, 'Name in one namespace');
  }

  role(r: RoleRecord): void {
    uuid('role', 'ID', r.ID);
    unique('role', this.roleIDs, r.ID, r.ID, 'ID');
    if (!ROLE_NAME_RE.test(r.Name)) throw refuse(`role ${r.ID} has an invalid Name ${JSON.stringify(r.Name.slice(0, 64))}`);
    checkGrants('role', r.ID, r, false);
    unique('role', this.roleNames, `${scope('role', r.ID, r)}/${r.Name}`, r.ID, 'Name in one namespace');
  }

  authMethod(m: AuthMethodRecord): void {
    if (!METHOD_NAME_RE.test(m.Name)) throw refuse(`auth method ${JSON.stringify(m.Name.slice(0, 64))} has an invalid Name`);
    const key = `${scope('auth method', m.Name, m)}/${m.Name}`.toLowerCase();
    if (this.methods.has(key)) throw refuse(`two auth methods are named ${JSON.stringify(m.Name)} in one namespace`);
    asAPI(`auth method ${JSON.stringify(m.Name)}`, () => this.hooks.authMethod?.(m));
    this.methods.set(key, m);
  }

  bindingRule(r: BindingRuleRecord): void {
    uuid('binding rule', 'ID', r.ID);
    unique('binding rule', this.ruleIDs, r.ID, r.ID, 'ID');
    this.rules.push([r, `${scope('binding rule', r.ID, r)}/${r.AuthMethod}`.toLowerCase()]);
  }

  /**
   * A token: AccessorID a UUID (only the anonymous token's is reserved), secret printable and
   * no longer than 256 characters (the anonymous one "anonymous"), both unique among the file's
   * tokens restored together (`held`: those staged so far).
   */
  token(t: TokenRecord, held: TokenLookup): void {
    uuid('token', 'AccessorID', t.AccessorID, (id) => id === ANONYMOUS_TOKEN_ID && !t.Local);
    if (t.AccessorID !== ANONYMOUS_TOKEN_ID && t.SecretID === ANONYMOUS_TOKEN_SECRET)
      throw refuse(`token ${t.AccessorID} has the anonymous token's secret`);
    if (!SECRET_RE.test(t.SecretID)) throw refuse(`token ${t.AccessorID} has an invalid SecretID`);
    scope('token', t.AccessorID, t);
    checkGrants('token', t.AccessorID, t, t.Local);
    checkTime(`token ${t.AccessorID} CreateTime`, t.CreateTime, true);
    checkTime(`token ${t.AccessorID} ExpirationTime`, t.ExpirationTime, false);
    if (t.AuthMethod !== undefined && t.AuthMethod !== '' && !METHOD_NAME_RE.test(t.AuthMethod))
      throw refuse(`token ${t.AccessorID} names an invalid AuthMethod`);
    if (held.byAccessor(t.AccessorID) !== undefined) throw refuse(`two tokens have the AccessorID ${t.AccessorID}`);
    // Never named in the message: the secret itself.
    const other = held.bySecret(t.SecretID) ?? held.byPreviousSecret(t.SecretID);
    if (other !== undefined) throw refuse(`tokens ${other.AccessorID} and ${t.AccessorID} have the same SecretID`);
    this.rotation(t, held);
    if (t.AccessorID === ANONYMOUS_TOKEN_ID) {
      if (t.SecretID !== ANONYMOUS_TOKEN_SECRET || t.Local) throw refuse('the anonymous token must be global with the secret "anonymous"');
      this.anonymous = t;
    }
  }

  /** A rotation in its overlap: the replaced secret valid and held by no other token (as either secret), with its end. */
  private rotation(t: TokenRecord, held: TokenLookup): void {
    if ((t.PreviousSecretID === undefined) !== (t.PreviousSecretExpirationTime === undefined))
      throw refuse(`token ${t.AccessorID} has one of PreviousSecretID and PreviousSecretExpirationTime without the other`);
    if (t.PreviousSecretID === undefined) return;
    if (!SECRET_RE.test(t.PreviousSecretID) || t.PreviousSecretID === t.SecretID || t.PreviousSecretID === ANONYMOUS_TOKEN_SECRET)
      throw refuse(`token ${t.AccessorID} has an invalid PreviousSecretID`);
    checkTime(`token ${t.AccessorID} PreviousSecretExpirationTime`, t.PreviousSecretExpirationTime, true);
    const other = held.bySecret(t.PreviousSecretID) ?? held.byPreviousSecret(t.PreviousSecretID);
    if (other !== undefined) throw refuse(`tokens ${other.AccessorID} and ${t.AccessorID} hold the same secret`);
  }

  /** Once every record has been read. `globals`: the file's global objects are restored (else only Local tokens). */
  finish(globals: boolean): void {
    if (!globals) return;
    for (const b of BUILTIN_POLICIES) if (!this.policyIDs.has(b.ID)) throw refuse(`the built-in policy ${b.Name} (${b.ID}) is missing`);
    for (const [rule, key] of this.rules) {
      const method = this.methods.get(key);
      if (method === undefined)
        throw refuse(`binding rule ${rule.ID} belongs to auth method ${JSON.stringify(rule.AuthMethod)}, which the snapshot does not hold`);
      asAPI(`binding rule ${rule.ID}`, () => this.hooks.bindingRule?.(rule, method));
    }
    if (!this.anonymous) throw refuse('the anonymous token is missing');
  }
}

/** Tokens held so far, by AccessorID and by secret (of either locality). */
export interface TokenLookup {
  byAccessor(accessor: string): TokenRecord | undefined;
  bySecret(secret: string): TokenRecord | undefined;
  /** The token whose last rotation replaced this secret. */
  byPreviousSecret(secret: string): TokenRecord | undefined;
}

/** A record with its Hash computed from its content: a stored hash is never taken on trust. */
export function recomputeHash(table: 'tokens' | 'policies' | 'roles' | string, record: object): void {
  const r = record as { Hash?: string };
  if (table === 'tokens') r.Hash = tokenHash(record as TokenRecord);
  else if (table === 'policies') r.Hash = policyHash(record as PolicyRecord);
  else if (table === 'roles') r.Hash = roleHash(record as RoleRecord);
}
