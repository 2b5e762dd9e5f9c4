import type { AuthMethodRecord, BindingRuleRecord, PolicyRecord, RoleRecord, TokenRecord } from '../domain/types.js';
import { TABLES, TABLE_NAMES, type TableName } from './schema.js';
import { policyHash, roleHash } from '../domain/hash.js';

/**
 * Checks of records read back from disk at start-up, in place. The zod schemas in
 * records.ts define the same shapes (a test holds both to agreement on valid and broken
 * records); at a million records, zod's copy of each would double the allocation and
 * the start-up time, so the load path checks without copying. Empty arrays become one
 * shared frozen array: most tokens have four, and a million of each cost memory and
 * garbage collection for nothing.
 */

const EMPTY: readonly never[] = Object.freeze([]);

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const isStr = (v: unknown): v is string => typeof v === 'string';
const isIndex = (v: unknown): boolean => typeof v === 'number' && Number.isInteger(v) && v >= 0;
const optional = (v: unknown, check: (x: unknown) => boolean): boolean => v === undefined || check(v);
const strings = (v: unknown): boolean => Array.isArray(v) && v.every(isStr);

/** Checks an array field, each item with `item`; an empty one is replaced by the shared empty array. */
function list(o: Obj, field: string, item: (x: unknown) => boolean): boolean {
  const v = o[field];
  if (!Array.isArray(v)) return false;
  if (v.length === 0) {
    o[field] = EMPTY;
    return true;
  }
  return v.every(item);
}

const link = (x: unknown): boolean => isObj(x) && isStr(x.ID);
const serviceIdentity = (x: unknown): boolean => isObj(x) && isStr(x.ServiceName) && optional(x.Datacenters, strings);
const nodeIdentity = (x: unknown): boolean => isObj(x) && isStr(x.NodeName) && isStr(x.Datacenter);
/** A templated policy; variables written as `Name` (before they were stored as Consul writes them) become `name` in place. */
const templatedPolicy = (x: unknown): boolean => {
  if (!isObj(x) || !isStr(x.TemplateName) || !optional(x.Datacenters, strings)) return false;
  const v = x.TemplateVariables;
  if (v === undefined) return true;
  if (!isObj(v)) return false;
  if (v.name === undefined && isStr(v.Name)) x.TemplateVariables = { name: v.Name };
  return isStr((x.TemplateVariables as Obj).name);
};

/** A binding rule's BindVars; `Name` of the older shape becomes `name` in place. */
const bindVars = (b: unknown): boolean => {
  if (!isObj(b)) return false;
  if (b.name === undefined && b.Name !== undefined) {
    b.name = b.Name;
    delete b.Name;
  }
  return optional(b.name, isStr);
};

const scoped = (o: Obj): boolean =>
  isStr(o.Namespace) && isStr(o.Partition) && isIndex(o.CreateIndex) && isIndex(o.ModifyIndex) && isStr(o.Hash);

function grants(o: Obj): boolean {
  return (
    list(o, 'ServiceIdentities', serviceIdentity) &&
    list(o, 'NodeIdentities', nodeIdentity) &&
    list(o, 'TemplatedPolicies', templatedPolicy)
  );
}

export function isTokenRecord(v: unknown): v is TokenRecord {
  return (
    isObj(v) &&
    isStr(v.AccessorID) &&
    isStr(v.SecretID) &&
    isStr(v.Description) &&
    list(v, 'Policies', link) &&
    list(v, 'Roles', link) &&
    grants(v) &&
    typeof v.Local === 'boolean' &&
    isStr(v.AuthMethod) &&
    optional(v.AuthMethodNamespace, isStr) &&
    optional(v.ExpirationTime, isStr) &&
    isStr(v.CreateTime) &&
    scoped(v)
  );
}

/**
 * A policy's and a role's Hash are recomputed from the record as it is read (never taken on
 * trust: README, "Security"); there are few of them. A token's is computed where it is shown
 * (service/views.ts): at a million tokens, recomputing at load would cost seconds of start-up.
 */
export function isPolicyRecord(v: unknown): v is PolicyRecord {
  if (
    !(isObj(v) && isStr(v.ID) && isStr(v.Name) && isStr(v.Description) && isStr(v.Rules) && optional(v.Datacenters, strings) && scoped(v))
  )
    return false;
  v.Hash = policyHash(v as unknown as PolicyRecord);
  return true;
}

export function isRoleRecord(v: unknown): v is RoleRecord {
  if (!(isObj(v) && isStr(v.ID) && isStr(v.Name) && isStr(v.Description) && list(v, 'Policies', link) && grants(v) && scoped(v)))
    return false;
  v.Hash = roleHash(v as unknown as RoleRecord);
  return true;
}

const placed = (o: Obj): boolean => isStr(o.Namespace) && isStr(o.Partition) && isIndex(o.CreateIndex) && isIndex(o.ModifyIndex);

export function isAuthMethodRecord(v: unknown): v is AuthMethodRecord {
  return (
    isObj(v) &&
    isStr(v.Name) &&
    isStr(v.Type) &&
    isStr(v.DisplayName) &&
    isStr(v.Description) &&
    isStr(v.MaxTokenTTL) &&
    (v.TokenLocality === '' || v.TokenLocality === 'local' || v.TokenLocality === 'global') &&
    isObj(v.Config) &&
    placed(v)
  );
}

const BIND_TYPES = new Set(['service', 'node', 'role', 'policy', 'templated-policy']);

export function isBindingRuleRecord(v: unknown): v is BindingRuleRecord {
  return (
    isObj(v) &&
    isStr(v.ID) &&
    isStr(v.Description) &&
    isStr(v.AuthMethod) &&
    isStr(v.Selector) &&
    BIND_TYPES.has(v.BindType as string) &&
    isStr(v.BindName) &&
    optional(v.BindVars, bindVars) &&
    placed(v)
  );
}

/** Hand-written checks for the tables whose records are loaded by the million (as fast as a read needs). */
const FAST_CHECKS: Partial<{ [T in TableName]: (v: unknown) => boolean }> = {
  tokens: isTokenRecord,
  policies: isPolicyRecord,
  roles: isRoleRecord,
  authMethods: isAuthMethodRecord,
  bindingRules: isBindingRuleRecord,
};

/** Each table's record check: its fast one, else its schema's. */
export const RECORD_CHECKS = Object.fromEntries(
  TABLE_NAMES.map((t) => [t, FAST_CHECKS[t] ?? ((v: unknown) => TABLES[t].schema.safeParse(v).success)]),
) as { [T in TableName]: (v: unknown) => boolean };
