// The vocabulary records are declared in (domain/records.ts declares them): the kinds a field
// holds, how a caller sees it, the shapes inside records, and what a table of fields derives
// (its record type, its content).

/** What a field holds, as stored. */
export type FieldKind =
  | 'string'
  | 'boolean'
  /** A datacenter index: an integer ≥ 0. */
  | 'index'
  /** RFC 3339 time, as text. */
  | 'time'
  /** Links to policies or roles, by ID. */
  | 'links'
  | 'serviceIdentities'
  | 'nodeIdentities'
  | 'templatedPolicies'
  /** A list of strings (datacenter names). */
  | 'strings'
  /** A free-form object (an auth method's type-specific Config). */
  | 'config'
  /** An auth method's token locality: '', 'local' or 'global'. */
  | 'tokenLocality'
  /** A binding rule's bind type. */
  | 'bindType'
  /** A binding rule's templated-policy variables. */
  | 'bindVars';

/**
 * How a field is shown to a caller:
 * - `plain` as stored (absent when absent);
 * - `omitEmpty` absent when empty ('' or []), as Consul omits empty lists;
 * - `named` links with each target's current name (links to what no longer exists dropped);
 * - `secret` the literal `<hidden>` to callers without acl:write;
 * - `hash` computed from the content as it is shown, never the stored value (docs/security.md, "Security");
 * - `detail` only in a full read, not in a list item;
 * - `withAuthMethod` only when the record's AuthMethod is set;
 * - `never` to no caller at all (a secret a rotation replaced): it leaves only by the inner paths.
 */
export type ViewMode = 'plain' | 'omitEmpty' | 'named' | 'secret' | 'hash' | 'detail' | 'withAuthMethod' | 'never';

/**
 * How the API treats a field:
 * - `input`: a write's body gives it and the record takes it as given (checked by its kind),
 *   its kind's empty value when absent: what a field needs no code of its own for;
 * - `checked`: a write's body gives it, and the service checks it and decides what is stored
 *   (IDs, links, identities, expiry, locality);
 * - `echoed`: the server sets it; a client that sends back what it read has it accepted and ignored.
 */
export type ApiRole = 'input' | 'checked' | 'echoed';

export interface FieldSpec {
  kind: FieldKind;
  /** What the field is for (the record types' documentation). */
  doc: string;
  optional?: true;
  api: ApiRole;
  view?: ViewMode;
  /** Its place in the content Hash (absent: not hashed): a tag, and the order in which fields are written. */
  hash?: { tag: string; at: number };
  /** The longest a write's body may give (strings, lists), where the default does not fit. */
  max?: number;
  /** What a write that gives more than `max` is told, where the field's own rule says it in Consul's words. */
  tooLong?: string;
  /** A write's body gives it as a duration (Go's "1h30m" or nanoseconds), stored as text. */
  inputAs?: 'duration';
  /**
   * The record form that first carries it (absent: 1, the first). A field of a later form is
   * optional, adds nothing to the Hash while absent, and travels only between servers that both
   * speak its form: a record holding it is never sent, whole or in part, to one that does not.
   */
  form?: number;
}

export type FieldTable = Readonly<Record<string, FieldSpec>>;

// ---- Shapes inside records ----

/** A link from a token or role to a policy or role, by ID. */
export interface Link {
  /** ID of the linked object. */
  ID: string;
}

/** A link as returned: the ID plus the name resolved at read time. */
export interface NamedLink {
  ID: string;
  Name: string;
}

export interface ServiceIdentity {
  /** Service the identity grants access as. */
  ServiceName: string;
  /** Datacenters the synthetic policy is valid in; absent means all. */
  Datacenters?: string[];
}

export interface NodeIdentity {
  /** Node the identity grants access as. */
  NodeName: string;
  /** The one datacenter the synthetic policy is valid in. */
  Datacenter: string;
}

export interface TemplatedPolicyLink {
  /** Name of a built-in templated policy, e.g. `builtin/service`. */
  TemplateName: string;
  /**
   * Variables for the template; `name` when the template needs one (Consul's JSON name for
   * its Name field; any letter case is accepted on input, and `Name` in records written before).
   */
  TemplateVariables?: { name: string };
  /** Datacenters the rendered policy is valid in; absent means all. */
  Datacenters?: string[];
}

export const BIND_TYPES = ['service', 'node', 'role', 'policy', 'templated-policy'] as const;
export type BindType = (typeof BIND_TYPES)[number];
export const TOKEN_LOCALITIES = ['', 'local', 'global'] as const;

/** The TypeScript type of each kind. */
export interface KindTypes {
  string: string;
  boolean: boolean;
  index: number;
  time: string;
  links: Link[];
  serviceIdentities: ServiceIdentity[];
  nodeIdentities: NodeIdentity[];
  templatedPolicies: TemplatedPolicyLink[];
  strings: string[];
  config: Record<string, unknown>;
  tokenLocality: (typeof TOKEN_LOCALITIES)[number];
  bindType: BindType;
  bindVars: { name?: string };
}

type Simplify<T> = { [K in keyof T]: T[K] } & {};

/** A record's type from its field table: optional fields optional, each of its kind's type. */
export type RecordOf<F extends FieldTable> = Simplify<
  { -readonly [K in keyof F as F[K]['optional'] extends true ? never : K]: KindTypes[F[K]['kind']] } & {
    -readonly [K in keyof F as F[K]['optional'] extends true ? K : never]?: KindTypes[F[K]['kind']];
  }
>;

/** The names of a table's fields the content Hash covers (declared with `hash`). */
export type HashedKey<F extends FieldTable> = { [K in keyof F]: F[K] extends { hash: object } ? K : never }[keyof F];

/** What a record grants and says about itself: the fields of its declaration the Hash covers. */
export type ContentOf<F extends FieldTable> = Pick<RecordOf<F>, HashedKey<F> & keyof RecordOf<F>>;

const hashedNames = new WeakMap<FieldTable, string[]>();

/** The hashed fields of a table, by name, in declared order. */
export function hashedFieldsOf(fields: FieldTable): string[] {
  let names = hashedNames.get(fields);
  if (names === undefined) {
    names = Object.entries(fields)
      .filter(([, spec]) => spec.hash !== undefined)
      .map(([name]) => name);
    hashedNames.set(fields, names);
  }
  return names;
}

/** The content of `record` by its declaration: each hashed field it holds, no other. */
export function contentOf<F extends FieldTable>(fields: F, record: Readonly<Record<string, unknown>>): ContentOf<F> {
  const out: Record<string, unknown> = {};
  for (const name of hashedFieldsOf(fields)) if (record[name] !== undefined) out[name] = record[name];
  return out as ContentOf<F>;
}
