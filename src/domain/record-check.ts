// The fast check of records read back (from disk, replication frames, snapshot files), derived
// from the field tables of domain/records.ts, and the wire schema that uses it: the strict
// schema's verdict at the fast check's speed.
import { z } from 'zod';
import { BIND_TYPES, EMPTY_OF, type FieldKind, type FieldTable, type RecordOf, TOKEN_LOCALITIES, isTime, recordSchema } from './records.js';

type Obj = Record<string, unknown>;
const EMPTY: readonly never[] = Object.freeze([]);
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const isStr = (v: unknown): v is string => typeof v === 'string';
const strings = (v: unknown): boolean => Array.isArray(v) && v.every(isStr);
const only = (o: Obj, keys: readonly string[]): boolean => {
  for (const k in o) if (!keys.includes(k)) return false;
  return true;
};
/** How many keys `o` has (a link is checked by the million: its one key counted, not looked up). */
const keyCount = (o: Obj): number => {
  let n = 0;
  for (const _ in o) n++;
  return n;
};

/** Checks (and, for older forms, mends in place) one item of a list kind. */
const ITEM_CHECKS: Partial<Record<FieldKind, (x: unknown) => boolean>> = {
  links: (x) => isObj(x) && isStr(x.ID) && keyCount(x) === 1,
  serviceIdentities: (x) =>
    isObj(x) && isStr(x.ServiceName) && (x.Datacenters === undefined || strings(x.Datacenters)) && only(x, ['ServiceName', 'Datacenters']),
  nodeIdentities: (x) => isObj(x) && isStr(x.NodeName) && isStr(x.Datacenter) && only(x, ['NodeName', 'Datacenter']),
  /** Variables written as `Name` (before they were stored as Consul writes them) become `name`. */
  templatedPolicies: (x) => {
    if (!isObj(x) || !isStr(x.TemplateName) || !(x.Datacenters === undefined || strings(x.Datacenters))) return false;
    if (!only(x, ['TemplateName', 'TemplateVariables', 'Datacenters'])) return false;
    const v = x.TemplateVariables;
    if (v === undefined) return true;
    if (!isObj(v)) return false;
    if (v.name === undefined && isStr(v.Name) && only(v, ['Name'])) x.TemplateVariables = { name: v.Name };
    const fixed = x.TemplateVariables as Obj;
    return isStr(fixed.name) && only(fixed, ['name']);
  },
  strings: isStr,
};

/** Checks a value of one kind (lists: each item; an empty list becomes one shared frozen array, in `o[field]`). */
function checkValue(o: Obj, field: string, kind: FieldKind): boolean {
  const v = o[field];
  switch (kind) {
    case 'string':
      return isStr(v);
    case 'time':
      return isStr(v) && isTime(v);
    case 'boolean':
      return typeof v === 'boolean';
    case 'index':
      return typeof v === 'number' && Number.isInteger(v) && v >= 0;
    case 'config':
      return isObj(v);
    case 'tokenLocality':
      return (TOKEN_LOCALITIES as readonly unknown[]).includes(v);
    case 'bindType':
      return (BIND_TYPES as readonly unknown[]).includes(v);
    case 'bindVars':
      if (!isObj(v)) return false;
      // `Name` of the older shape becomes `name`.
      if (v.name === undefined && v.Name !== undefined) {
        v.name = v.Name;
        delete v.Name;
      }
      return (v.name === undefined || isStr(v.name)) && only(v, ['name']);
    default: {
      if (!Array.isArray(v)) return false;
      if (v.length === 0) {
        // Most tokens have four empty lists: a million of each would cost memory and collection for nothing.
        o[field] = EMPTY;
        return true;
      }
      return v.every(ITEM_CHECKS[kind] as (x: unknown) => boolean);
    }
  }
}

/**
 * The check of a record read back by the million (no copy, unlike a schema's parse): every
 * declared field of its kind, absent only when optional, no field undeclared. Mends older
 * forms in place; `schema` and this agree on every record (a test holds them to it).
 */
export function recordCheck<F extends FieldTable>(fields: F): (v: unknown) => v is RecordOf<F> {
  const plan = Object.entries(fields).map(([name, spec]) => ({
    name,
    kind: spec.kind,
    optional: spec.optional === true,
    given: spec.api === 'input',
  }));
  return (v: unknown): v is RecordOf<F> => {
    if (!isObj(v)) return false;
    let held = 0;
    for (const p of plan) {
      if (v[p.name] === undefined) {
        if (p.optional) {
          // Declared, held as undefined: a key of its own, as absent as none.
          if (p.name in v) held++;
          continue;
        }
        // A field taken as given that a record lacks (written before the field existed): its kind's empty value.
        if (!p.given) return false;
        v[p.name] = EMPTY_OF[p.kind]();
      }
      if (!checkValue(v, p.name, p.kind)) return false;
      held++;
    }
    // No field undeclared: as many keys as the declared fields held.
    return keyCount(v) === held;
  };
}

/**
 * The strict schema's verdict at the fast check's speed, for records that come by the million
 * (replication frames, snapshot files): the fast check, in place and without a copy; only for a
 * record it refuses, the strict schema, whose issue names the field.
 */
export function recordWireSchema<F extends FieldTable>(fields: F): z.ZodType<RecordOf<F>> {
  const check = recordCheck(fields);
  const strict = recordSchema(fields);
  return z.unknown().superRefine((v, ctx) => {
    if (check(v)) return;
    const parsed = strict.safeParse(v);
    const issues = parsed.success ? [{ message: 'not a well-formed record', path: [] as PropertyKey[] }] : parsed.error.issues;
    for (const issue of issues) ctx.addIssue({ code: 'custom', message: issue.message, path: [...issue.path] });
  }) as unknown as z.ZodType<RecordOf<F>>;
}
