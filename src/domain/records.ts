import { z } from 'zod';
import { BIND_TYPES, type FieldKind, type FieldTable, type KindTypes, type RecordOf, TOKEN_LOCALITIES } from './fields.js';

// The vocabulary is its own file; every importer of records reads it from here too.
export * from './fields.js';

/**
 * Every stored record, declared once (src/ARCHITECTURE.md, "The store"; Consul's
 * `agent/structs/acl.go` declares ACLToken once and every layer carries it). From each
 * field table derive: the TypeScript type, the strict schema every inner boundary checks
 * (replication and snapshot frames, the store's reads), the fast check of records read back
 * by the million, the positional field order of the compact table, the content Hash, the
 * view a caller sees and its response schema, and the API's write bodies. A field added here
 * is carried everywhere; `test/records/every-field.test.ts` pushes a record with every field
 * set through every path and fails naming the path that loses one.
 */

// ---- The records ----

const scope = {
  Namespace: { kind: 'string', api: 'checked', doc: 'Namespace within the partition (Enterprise); `default` when unused.', max: 64 },
  Partition: { kind: 'string', api: 'checked', doc: 'Admin partition (Enterprise); `default` when unused.', max: 64 },
} as const satisfies FieldTable;

const indexes = {
  CreateIndex: { kind: 'index', api: 'echoed', doc: 'Index of the change that created the object in this datacenter.' },
  ModifyIndex: { kind: 'index', api: 'echoed', doc: 'Index of the change that last modified the object in this datacenter.' },
} as const satisfies FieldTable;

/**
 * Test builds only (WATCHWORD_BUILD_TEST_FORM=1, read once as a build flag): a token field of record
 * form 2, standing for "a release that adds a token field" in the tests of the upgrade trap
 * (hashicorp/consul#9022). No release sets the flag.
 */
const TEST_FORM_BUILD = typeof process !== 'undefined' && process.env.WATCHWORD_BUILD_TEST_FORM === '1';
const TEST_FORM_TOKEN_FIELDS = {
  Note: {
    kind: 'string',
    optional: true,
    api: 'input',
    view: 'omitEmpty',
    doc: "A test build's note (record form 2).",
    hash: { tag: 'note', at: 7 },
    form: 2,
    max: 256,
  },
} as const satisfies FieldTable;

/** A token (docs/http-api.md, "HTTP API"): the fields in the order a view shows them (Consul's). */
export const TOKEN_FIELDS = {
  AccessorID: { kind: 'string', api: 'checked', doc: 'Public identifier of the token.', max: 128 },
  SecretID: {
    kind: 'string',
    api: 'checked',
    view: 'secret',
    doc: 'The credential; never returned to callers without acl:write.',
    max: 256,
  },
  Description: { kind: 'string', api: 'checked', doc: 'Free-form text for humans.', hash: { tag: 'description', at: 0 } },
  Policies: { kind: 'links', api: 'checked', view: 'named', doc: 'Direct policy links.', hash: { tag: 'policy', at: 3 } },
  Roles: { kind: 'links', api: 'checked', view: 'named', doc: 'Role links.', hash: { tag: 'role', at: 2 } },
  ServiceIdentities: {
    kind: 'serviceIdentities',
    api: 'checked',
    view: 'omitEmpty',
    doc: 'Service identities, rendered through `builtin/service`.',
    hash: { tag: 'service', at: 4 },
  },
  NodeIdentities: {
    kind: 'nodeIdentities',
    api: 'checked',
    view: 'omitEmpty',
    doc: 'Node identities, rendered through `builtin/node`.',
    hash: { tag: 'node', at: 5 },
  },
  TemplatedPolicies: {
    kind: 'templatedPolicies',
    api: 'checked',
    view: 'omitEmpty',
    doc: 'Templated policies rendered into synthetic policies.',
    hash: { tag: 'template', at: 6 },
  },
  Local: {
    kind: 'boolean',
    api: 'checked',
    doc: 'True when the token stays in the datacenter that made it.',
    hash: { tag: 'locality', at: 1 },
  },
  AuthMethod: {
    kind: 'string',
    api: 'checked',
    view: 'omitEmpty',
    doc: 'Auth method that created the token (login only); empty otherwise.',
    max: 256,
  },
  AuthMethodNamespace: {
    kind: 'string',
    optional: true,
    api: 'checked',
    view: 'withAuthMethod',
    doc: 'Namespace of the auth method, when AuthMethod is set.',
    max: 64,
  },
  ExpirationTime: {
    kind: 'time',
    optional: true,
    api: 'checked',
    doc: 'RFC 3339 time after which the token is revoked; absent means never.',
  },
  CreateTime: { kind: 'time', api: 'echoed', doc: 'RFC 3339 time the token was created (set by the server).' },
  PreviousSecretID: {
    kind: 'string',
    optional: true,
    api: 'echoed',
    view: 'never',
    doc: 'The SecretID the last rotation replaced: it authenticates until PreviousSecretExpirationTime, then nowhere. Never shown.',
    max: 256,
  },
  PreviousSecretExpirationTime: {
    kind: 'time',
    optional: true,
    api: 'echoed',
    doc: "RFC 3339 time the secret the last rotation replaced stops authenticating (watchword's own, `PUT /v1/acl/token/:id/rotate`).",
  },
  Hash: { kind: 'string', api: 'echoed', view: 'hash', doc: 'Base64 SHA-256 over the content fields; equal across datacenters.' },
  ...scope,
  ...indexes,
  // A test build's field of record form 2 (below): in test builds only, and unknown to this type.
  ...((TEST_FORM_BUILD ? TEST_FORM_TOKEN_FIELDS : {}) as Record<never, never>),
} as const satisfies FieldTable;

/** A policy name's longest, and what a name that breaks the rule is told (domain/policy-object.ts checks it). */
export const POLICY_NAME_MAX = 128;
export const POLICY_NAME_INVALID =
  "Invalid Policy: invalid Name. Only alphanumeric characters, '-', '_' and a single '/' (not leading) are allowed, at most " +
  `${POLICY_NAME_MAX} characters`;

export const POLICY_FIELDS = {
  ID: { kind: 'string', api: 'checked', doc: 'Identifier (UUID).', max: 128 },
  Name: {
    kind: 'string',
    api: 'checked',
    doc: 'Name, unique per (partition, namespace), compared case-insensitively.',
    max: POLICY_NAME_MAX,
    tooLong: POLICY_NAME_INVALID,
    hash: { tag: 'name', at: 0 },
  },
  Description: { kind: 'string', api: 'checked', doc: 'Free-form text for humans.', hash: { tag: 'description', at: 1 } },
  Rules: {
    kind: 'string',
    api: 'checked',
    view: 'detail',
    doc: 'Rules text (HCL or JSON) as given.',
    max: 512 * 1024,
    hash: { tag: 'rules', at: 2 },
  },
  Datacenters: {
    kind: 'strings',
    optional: true,
    api: 'checked',
    view: 'omitEmpty',
    doc: 'Datacenters the policy is valid in; absent means all.',
    hash: { tag: 'datacenters', at: 3 },
  },
  Hash: { kind: 'string', api: 'echoed', view: 'hash', doc: 'Base64 SHA-256 over the content fields.' },
  ...scope,
  ...indexes,
} as const satisfies FieldTable;

export const ROLE_FIELDS = {
  ID: { kind: 'string', api: 'checked', doc: 'Identifier (UUID).', max: 128 },
  Name: {
    kind: 'string',
    api: 'checked',
    doc: 'Name, unique per (partition, namespace), compared case-insensitively.',
    max: 1024,
    hash: { tag: 'name', at: 0 },
  },
  Description: { kind: 'string', api: 'checked', doc: 'Free-form text for humans.', hash: { tag: 'description', at: 1 } },
  Policies: { kind: 'links', api: 'checked', view: 'named', doc: 'Policy links.', hash: { tag: 'policy', at: 2 } },
  ServiceIdentities: {
    kind: 'serviceIdentities',
    api: 'checked',
    view: 'omitEmpty',
    doc: 'Service identities.',
    hash: { tag: 'service', at: 3 },
  },
  NodeIdentities: { kind: 'nodeIdentities', api: 'checked', view: 'omitEmpty', doc: 'Node identities.', hash: { tag: 'node', at: 4 } },
  TemplatedPolicies: {
    kind: 'templatedPolicies',
    api: 'checked',
    view: 'omitEmpty',
    doc: 'Templated policies.',
    hash: { tag: 'template', at: 5 },
  },
  Hash: { kind: 'string', api: 'echoed', view: 'hash', doc: 'Base64 SHA-256 over the content fields.' },
  ...scope,
  ...indexes,
} as const satisfies FieldTable;

/** How an auth method turns an external identity into a token (docs/http-api.md, "HTTP API"); a global object. */
export const AUTH_METHOD_FIELDS = {
  Name: { kind: 'string', api: 'checked', doc: 'Unique per (partition, namespace).', max: 128 },
  Type: { kind: 'string', api: 'checked', doc: '`jwt` or `kubernetes`.', max: 64 },
  DisplayName: { kind: 'string', api: 'checked', view: 'omitEmpty', doc: 'Name shown to people.', max: 256 },
  Description: { kind: 'string', api: 'checked', view: 'omitEmpty', doc: 'Free-form text for humans.' },
  MaxTokenTTL: {
    kind: 'string',
    api: 'checked',
    inputAs: 'duration',
    view: 'omitEmpty',
    doc: 'Lifetime of tokens made by login, as a duration (e.g. `1h0m0s`); empty: no expiry.',
  },
  TokenIdleTTL: {
    kind: 'string',
    optional: true,
    api: 'checked',
    inputAs: 'duration',
    view: 'omitEmpty',
    doc: "watchword's own: login tokens unused this long are revoked (`0s`: never); absent: the agent's `login_token_idle_ttl`.",
  },
  TokenLocality: {
    kind: 'tokenLocality',
    api: 'checked',
    view: 'omitEmpty',
    doc: 'As sent: `local` or `` (the same, the default): login tokens stay where they were made; `global`: they replicate.',
  },
  Config: { kind: 'config', api: 'checked', view: 'detail', doc: "Type-specific configuration, as Consul's." },
  ...scope,
  ...indexes,
} as const satisfies FieldTable;

/** Which of a method's identities get which links (docs/http-api.md, "HTTP API"); a global object. */
export const BINDING_RULE_FIELDS = {
  ID: { kind: 'string', api: 'checked', doc: 'Identifier (UUID).', max: 128 },
  Description: { kind: 'string', api: 'checked', doc: 'Free-form text for humans.' },
  AuthMethod: { kind: 'string', api: 'checked', doc: 'Name of the auth method (same partition and namespace); immutable.', max: 128 },
  Selector: { kind: 'string', api: 'checked', doc: 'bexpr over the verified identity; empty matches every identity.', max: 4096 },
  BindType: {
    kind: 'bindType',
    api: 'checked',
    doc: 'What a match binds: a service or node identity, a role, a policy, a templated policy.',
  },
  BindName: { kind: 'string', api: 'checked', doc: 'What to bind, with `${value.x}` interpolation.', max: 1024 },
  BindVars: {
    kind: 'bindVars',
    optional: true,
    api: 'checked',
    doc: 'Variables of a templated-policy binding, written as Consul writes them (`name`).',
  },
  ...scope,
  ...indexes,
} as const satisfies FieldTable;

/**
 * A limit on the tokens of one scope (docs/http-api.md, "Quotas"): an auth method's, a
 * namespace's or a partition's. Global unless Local (a Local quota stays in the datacenter that
 * made it and counts only its Local tokens).
 */
export const QUOTA_FIELDS = {
  ID: { kind: 'string', api: 'checked', doc: 'Identifier (UUID).', max: 128 },
  Name: { kind: 'string', api: 'checked', doc: 'Unique among quotas, compared case-insensitively.', max: 128 },
  Description: { kind: 'string', api: 'input', view: 'omitEmpty', doc: 'Free-form text for humans.', max: 1024 },
  AuthMethod: {
    kind: 'string',
    api: 'checked',
    view: 'omitEmpty',
    doc: 'The scope, when it is an auth method: the tokens its logins made. Exactly one of AuthMethod, Namespace, Partition.',
    max: 128,
  },
  Namespace: { kind: 'string', api: 'checked', view: 'omitEmpty', doc: 'The scope, when it is a namespace (in any partition).', max: 64 },
  Partition: { kind: 'string', api: 'checked', view: 'omitEmpty', doc: 'The scope, when it is an admin partition.', max: 64 },
  MaxTokens: {
    kind: 'index',
    optional: true,
    api: 'checked',
    doc: 'The most live tokens the scope may hold here (expired ones count until reaped); absent: no limit.',
  },
  MaxTokenTTL: {
    kind: 'string',
    api: 'checked',
    inputAs: 'duration',
    view: 'omitEmpty',
    doc: 'The longest a token made in the scope may live; one made without an expiry is given this one. Empty: no limit.',
  },
  MinTokenTTL: {
    kind: 'string',
    api: 'checked',
    inputAs: 'duration',
    view: 'omitEmpty',
    doc: 'The shortest expiry a token made in the scope may be given. Empty: no limit.',
  },
  Local: { kind: 'boolean', api: 'checked', doc: 'Kept in this datacenter only, counting only its Local tokens.' },
  ...indexes,
} as const satisfies FieldTable;

export type TokenRecord = RecordOf<typeof TOKEN_FIELDS>;
export type PolicyRecord = RecordOf<typeof POLICY_FIELDS>;
export type RoleRecord = RecordOf<typeof ROLE_FIELDS>;
export type AuthMethodRecord = RecordOf<typeof AUTH_METHOD_FIELDS>;
export type BindingRuleRecord = RecordOf<typeof BINDING_RULE_FIELDS>;
export type QuotaRecord = RecordOf<typeof QUOTA_FIELDS>;

/** Each stored record kind with its field table, by table name. */
export const RECORD_FIELDS = {
  tokens: TOKEN_FIELDS,
  policies: POLICY_FIELDS,
  roles: ROLE_FIELDS,
  authMethods: AUTH_METHOD_FIELDS,
  bindingRules: BINDING_RULE_FIELDS,
  quotas: QUOTA_FIELDS,
} as const;

export type RecordKind = keyof typeof RECORD_FIELDS;

/** A table's field names in their declared order (the positional form's order). */
export const fieldNames = (fields: FieldTable): string[] => Object.keys(fields);

// ---- Derived: the strict schema of each record ----

const link = z.strictObject({ ID: z.string() });
const serviceIdentity = z.strictObject({ ServiceName: z.string(), Datacenters: z.array(z.string()).optional() });
const nodeIdentity = z.strictObject({ NodeName: z.string(), Datacenter: z.string() });
/** Variables written as `Name` (records from before they were stored as Consul writes them) read as `name`. */
const olderName = (v: unknown): unknown =>
  v !== null && typeof v === 'object' && !Array.isArray(v) && !('name' in v) && 'Name' in v ? { name: (v as { Name: unknown }).Name } : v;
const templatedPolicy = z.strictObject({
  TemplateName: z.string(),
  TemplateVariables: z.preprocess(olderName, z.strictObject({ name: z.string() })).optional(),
  Datacenters: z.array(z.string()).optional(),
});

/** The value a field of each kind has when a write's body does not give it. */
export const EMPTY_OF: { [K in FieldKind]: () => KindTypes[K] } = {
  string: () => '',
  boolean: () => false,
  index: () => 0,
  time: () => '',
  links: () => [],
  serviceIdentities: () => [],
  nodeIdentities: () => [],
  templatedPolicies: () => [],
  strings: () => [],
  config: () => ({}),
  tokenLocality: () => '',
  bindType: () => 'service',
  bindVars: () => ({}),
};

/** A time field's value: text a date parses from. */
export function isTime(v: string): boolean {
  return !Number.isNaN(Date.parse(v));
}

const KIND_SCHEMAS: { [K in FieldKind]: z.ZodType<KindTypes[K]> } = {
  string: z.string(),
  boolean: z.boolean(),
  index: z.number().int().nonnegative(),
  time: z.string().refine(isTime, 'expected an RFC 3339 time'),
  links: z.array(link),
  serviceIdentities: z.array(serviceIdentity),
  nodeIdentities: z.array(nodeIdentity),
  templatedPolicies: z.array(templatedPolicy),
  strings: z.array(z.string()),
  config: z.record(z.string(), z.unknown()),
  tokenLocality: z.enum(TOKEN_LOCALITIES),
  bindType: z.enum(BIND_TYPES),
  bindVars: z.preprocess(olderName, z.strictObject({ name: z.string().optional() })) as z.ZodType<{ name?: string }>,
};

/**
 * The strict schema of a record: every declared field of its kind, an unknown field refused
 * (as at the API's edge), never stripped. Every inner boundary checks records with it.
 */
export function recordSchema<F extends FieldTable>(fields: F): z.ZodType<RecordOf<F>> {
  const shape: Record<string, z.ZodType> = {};
  for (const [name, spec] of Object.entries(fields)) {
    const s = KIND_SCHEMAS[spec.kind] as z.ZodType;
    // A field taken as given that a record lacks (written before the field existed) has its kind's empty value.
    shape[name] = spec.optional ? s.optional() : spec.api === 'input' ? s.default(() => EMPTY_OF[spec.kind]() as never) : s;
  }
  return z.strictObject(shape) as unknown as z.ZodType<RecordOf<F>>;
}

// ---- Derived: what a write takes as given ----

/**
 * `record` with each field taken as given that it lacks set to its kind's empty value (an
 * optional one left out): the store puts every record through it, so no way of making a record
 * (a write's body, a login, the built-ins, a restore) can leave such a field out.
 */
export function withDefaults<F extends FieldTable, R extends object>(fields: F, record: R): R {
  let out: Record<string, unknown> | undefined;
  for (const { name, kind } of inputFieldsOf(fields).required) {
    if ((record as Record<string, unknown>)[name] !== undefined) continue;
    const filled: Record<string, unknown> = out ?? { ...(record as Record<string, unknown>) };
    filled[name] = EMPTY_OF[kind]();
    out = filled;
  }
  return (out ?? record) as R;
}

/** A table's fields taken as given (`api: 'input'`), listed once per table: every write walks them. */
interface InputFields {
  all: ReadonlyArray<{ name: string; kind: FieldKind; optional: boolean }>;
  /** Those not optional: a record lacking one gets its kind's empty value. */
  required: ReadonlyArray<{ name: string; kind: FieldKind }>;
}

const inputFields = new WeakMap<FieldTable, InputFields>();

function inputFieldsOf(fields: FieldTable): InputFields {
  let known = inputFields.get(fields);
  if (known === undefined) {
    const all = Object.entries(fields)
      .filter(([, spec]) => spec.api === 'input')
      .map(([name, spec]) => ({ name, kind: spec.kind, optional: spec.optional === true }));
    known = { all, required: all.filter((f) => !f.optional) };
    inputFields.set(fields, known);
  }
  return known;
}

/**
 * The fields a write's body gives that the record takes as given (`api: 'input'`), each its
 * kind's empty value when absent (an optional one left out): what a service copies into the
 * record it writes, so a field declared that way needs no code in the service.
 */
export function givenFields<F extends FieldTable>(fields: F, body: Readonly<Record<string, unknown>>): Partial<RecordOf<F>> {
  const out: Record<string, unknown> = {};
  for (const { name, kind, optional } of inputFieldsOf(fields).all) {
    const v = body[name];
    if (v !== undefined) out[name] = v;
    else if (!optional) out[name] = EMPTY_OF[kind]();
  }
  return out as Partial<RecordOf<F>>;
}

/** The later record forms (2 and up) whose fields `record` holds: what it needs every server to speak. */
export function laterForms(fields: FieldTable, record: object): number[] {
  const forms = new Set<number>();
  for (const [name, spec] of Object.entries(fields)) {
    const form = spec.form ?? 1;
    if (form <= 1) continue;
    const value = (record as Record<string, unknown>)[name];
    if (value !== undefined && value !== '') forms.add(form);
  }
  return [...forms].sort((a, b) => a - b);
}
