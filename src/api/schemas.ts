import { z } from 'zod';
import { parseDuration } from '../domain/duration.js';
import { nodeIdentityShape, serviceIdentityShape, templatedPolicyShape } from '../domain/shapes.js';
import { ciObject } from './ci-object.js';
import {
  AUTH_METHOD_FIELDS,
  BINDING_RULE_FIELDS,
  QUOTA_FIELDS,
  type FieldKind,
  type FieldSpec,
  type FieldTable,
  type NodeIdentity,
  type ServiceIdentity,
  type TemplatedPolicyLink,
  POLICY_FIELDS,
  ROLE_FIELDS,
  TOKEN_FIELDS,
} from '../domain/records.js';

/**
 * The wire contract, shared by the server, the OpenAPI document and the client.
 *
 * Request bodies. Every optional field also accepts null (clients in other languages
 * send it for "unset"); nulls become absent. Strings and arrays are bounded so a
 * client cannot make the daemon do unbounded work within the 1 MiB body limit.
 */
const MAX_LIST = 4096;
const MAX_TEXT = 65_536;

const str = (max = 1024) => z.string().max(max);
const opt = <T extends z.ZodType>(schema: T) => schema.nullish().transform((v) => (v === null ? undefined : v));
const list = <T extends z.ZodType>(item: T) => opt(z.array(item).max(MAX_LIST));

const RFC3339_RE = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

/** RFC 3339 time to ms since the epoch. */
export const rfc3339Time = z.string().transform((v, ctx) => {
  const ms = RFC3339_RE.test(v) ? Date.parse(v.replace(/(\.\d{3})\d+/, '$1')) : Number.NaN;
  if (Number.isNaN(ms)) {
    ctx.addIssue({ code: 'custom', message: `expected an RFC 3339 time such as "2030-01-02T15:04:05Z", got ${JSON.stringify(v)}` });
    return z.NEVER;
  }
  return ms;
});

/** A Go duration string ("90s", "1h30m") or an integer of nanoseconds, to ms. */
export const goDuration = z.union([z.string(), z.number()]).transform((v, ctx) => {
  const ms = typeof v === 'number' ? (Number.isInteger(v) ? v / 1e6 : undefined) : parseDuration(v);
  if (ms === undefined || !Number.isFinite(ms)) {
    ctx.addIssue({
      code: 'custom',
      message: `expected a duration such as "90s" or "1h30m" or an integer of nanoseconds, got ${JSON.stringify(v)}`,
    });
    return z.NEVER;
  }
  return ms;
});

export const linkBody = ciObject({ ID: opt(str(128)), Name: opt(str(256)) });

export const serviceIdentityBody = ciObject({
  ServiceName: opt(str(512)),
  Datacenters: list(str(256)),
});

export const nodeIdentityBody = ciObject({
  NodeName: opt(str(512)),
  Datacenter: opt(str(256)),
});

export const templatedPolicyBody = ciObject({
  TemplateName: opt(str(256)),
  TemplateVariables: opt(z.record(z.string().max(64), z.unknown())),
  Datacenters: list(str(256)),
});

const scopeFields = { Namespace: opt(str(64)), Partition: opt(str(64)) };

/** Return-side fields a client may echo back on any write; accepted and ignored (with each record's own echoed fields). */
const ECHOED = ['CreateIndex', 'ModifyIndex', 'Hash', 'CreateTime', 'LastUsedTime'];

/** What a write's body gives for a field of each kind, as the body is decoded (times and durations in ms). */
interface BodyTypes {
  string: string;
  boolean: boolean;
  index: number;
  time: number;
  links: Array<{ ID?: string; Name?: string }>;
  serviceIdentities: Array<{ ServiceName?: string; Datacenters?: string[] }>;
  nodeIdentities: Array<{ NodeName?: string; Datacenter?: string }>;
  templatedPolicies: Array<{ TemplateName?: string; TemplateVariables?: Record<string, unknown>; Datacenters?: string[] }>;
  strings: string[];
  config: Record<string, unknown>;
  tokenLocality: string;
  bindType: string;
  bindVars: { name?: string };
}

/** A write's body as decoded: every field of a record but those the server sets, each optional. */
export type BodyOf<F extends FieldTable> = {
  [K in keyof F as F[K]['api'] extends 'echoed' ? never : K]?: F[K] extends { inputAs: 'duration' } ? number : BodyTypes[F[K]['kind']];
};

/** A write's body as a client sends it (times as RFC 3339 text, durations as Go's text or nanoseconds). */
export type BodyInputOf<F extends FieldTable> = {
  [K in keyof F as F[K]['api'] extends 'echoed' ? never : K]?: F[K] extends { inputAs: 'duration' }
    ? string | number
    : F[K]['kind'] extends 'time'
      ? string
      : BodyTypes[F[K]['kind']];
};

/** How a write's body gives a field of a record (bounded: a client cannot make the daemon do unbounded work). */
function bodyField(spec: FieldSpec): z.ZodType {
  if (spec.inputAs === 'duration') return opt(goDuration);
  switch (spec.kind) {
    case 'string':
      return opt(z.string().max(spec.max ?? MAX_TEXT, spec.tooLong));
    case 'boolean':
      return opt(z.boolean());
    case 'index':
      return opt(z.number().int().nonnegative());
    case 'time':
      return opt(rfc3339Time);
    case 'links':
      return list(linkBody);
    case 'serviceIdentities':
      return list(serviceIdentityBody);
    case 'nodeIdentities':
      return list(nodeIdentityBody);
    case 'templatedPolicies':
      return list(templatedPolicyBody);
    case 'strings':
      return list(str(256));
    case 'config':
      return opt(z.record(z.string().max(256), z.unknown()));
    case 'tokenLocality':
      return opt(z.string().max(16));
    case 'bindType':
      return opt(z.string().max(32));
    case 'bindVars':
      return opt(ciObject({ name: opt(str(1024)) }));
  }
}

/**
 * The body of a record's writes, from its declaration (domain/records.ts): every field but those
 * the server sets, which a client echoing back what it read has accepted and ignored; `extra`
 * fields only a write takes (ExpirationTTL).
 */
function writeBody<F extends FieldTable, E extends z.ZodRawShape = Record<never, never>>(fields: F, extra?: E) {
  const shape: Record<string, z.ZodType> = {};
  const echoed = new Set(ECHOED);
  for (const [name, spec] of Object.entries(fields)) {
    if (spec.api === 'echoed') echoed.add(name);
    else shape[name] = bodyField(spec);
  }
  return ciObject({ ...shape, ...extra }, [...echoed]) as unknown as z.ZodType<
    BodyOf<F> & ([keyof E] extends [never] ? unknown : z.output<z.ZodObject<E>>),
    BodyInputOf<F> & ([keyof E] extends [never] ? unknown : z.input<z.ZodObject<E>>)
  >;
}

export const tokenBody = writeBody(TOKEN_FIELDS, { ExpirationTTL: opt(goDuration) });

/** A rotation's body: how long the replaced secret keeps authenticating (default 0, at most 24h). */
export const rotateBody = ciObject({ Overlap: opt(goDuration) });

export const cloneBody = ciObject({ Description: opt(str(MAX_TEXT)), ...scopeFields });

export const policyBody = writeBody(POLICY_FIELDS);

export const bootstrapBody = ciObject({ BootstrapSecret: opt(str(256)) });

export const roleBody = writeBody(ROLE_FIELDS);

/** Variables for a templated-policy preview: `{"Name": "api"}` (key case-insensitive). */
export const templateVariablesBody = ciObject({ Name: opt(str(512)) });

/**
 * One authorization check (docs/enforcing-client.md, "Enforcing policies in your service"); the body of /v1/internal/acl/authorize is an
 * array of 1 to 64.
 */
export const authorizationCheckBody = ciObject({
  Resource: str(64),
  Segment: opt(str(4096)),
  Access: str(32),
  ...scopeFields,
}).meta({ id: 'AuthorizationCheck' });

export const authorizeBody = z.array(authorizationCheckBody).min(1).max(64);

const decisionSourceFields = {
  Source: z.enum(['policy', 'role', 'service identity', 'node identity', 'templated policy', 'global-management', 'default_policy']),
  ID: z.string().optional(),
  Name: z.string().optional(),
  Policy: z.object({ ID: z.string(), Name: z.string() }).optional(),
  Identity: z.string().optional(),
  Rule: z.string(),
  Block: z.string().optional(),
};

/** Why a check was answered as it was (`?explain`): the deciding source and rule, and the rule that lost. */
export const decisionReason = z
  .object({ ...decisionSourceFields, Lost: z.object(decisionSourceFields).optional() })
  .meta({ id: 'DecisionReason' });

/** What `?dry-run` on a policy or role update means (the OpenAPI document's words). */
export const DRY_RUN_DOC =
  'When present, nothing is written: the answer says, of the checks asked in the last hour for the tokens the change reaches ' +
  '(at this server, and reported by enforcing clients), which would flip';

/** A dry run's answer: the tokens the change reaches and the checks that would flip. */
export const dryRunResponse = z
  .object({
    Tokens: z.number().describe('Tokens the change reaches'),
    TokensWithChecks: z.number().describe('Of them, those with checks seen in the last hour'),
    Checks: z.number().describe('Checks judged before and after'),
    Flips: z.array(
      z.object({
        Resource: z.string(),
        Segment: z.string().optional(),
        Access: z.string(),
        Namespace: z.string(),
        Partition: z.string(),
        From: z.boolean(),
        To: z.boolean(),
        Tokens: z.number(),
        Example: z.string().describe('The AccessorID of one token whose answer flips'),
      }),
    ),
    OutOfScope: z
      .object({ Tokens: z.number(), Flipping: z.number() })
      .optional()
      .describe('Tokens reached where the caller may not read: counted, never named (Flipping: those with a check that would flip)'),
    NotRecorded: z.number().describe('Checks the recorder could not keep (past its bounds)'),
  })
  .meta({ id: 'DryRunAnswer' });

/** GET /v1/acl/who-can: the tokens and roles granted a check, with reasons, paged. */
export const whoCanResponse = z
  .object({
    Resource: z.string(),
    Segment: z.string().optional(),
    Access: z.string(),
    Namespace: z.string(),
    Partition: z.string(),
    Tokens: z.array(z.object({ AccessorID: z.string(), Description: z.string(), Local: z.boolean(), Reason: decisionReason })),
    Roles: z.array(z.object({ ID: z.string(), Name: z.string(), Reason: decisionReason })).optional(),
    NextCursor: z.string().optional().describe('Where the next page starts; absent on the last'),
    Scanned: z.number().describe('Tokens looked at for this page'),
  })
  .meta({ id: 'WhoCanAnswer' });

export const authorizeResponse = z
  .array(
    z.object({
      Resource: z.string(),
      Segment: z.string().optional(),
      Access: z.string(),
      Namespace: z.string().optional(),
      Partition: z.string().optional(),
      Allow: z.boolean(),
      Reason: decisionReason.optional(),
    }),
  )
  .meta({ id: 'AuthorizationAnswers' });

/**
 * GET /v1/internal/acl/authorizer: what an enforcing client compiles for the request's token (docs/enforcing-client.md, "Enforcing
 * policies in your service").
 */
export const tokenAuthorizerResponse = z
  .object({
    AccessorID: z.string(),
    Namespace: z.string(),
    Partition: z.string(),
    ExpirationTime: z.string().optional(),
    /**
     * Seconds this secret had left when the answer was made (with ExpirationTime): a client
     * judges the end on its own monotonic clock, whatever its wall clock says. Not in the hash.
     */
    SecondsLeft: z.number().optional(),
    DefaultPolicy: z.enum(['allow', 'deny']),
    Policies: z.array(z.object({ ID: z.string(), Rules: z.string(), Namespace: z.string(), Partition: z.string(), Builtin: z.boolean() })),
  })
  .meta({ id: 'TokenAuthorizer' });
export type TokenAuthorizerResponse = z.infer<typeof tokenAuthorizerResponse>;

export const authMethodBody = writeBody(AUTH_METHOD_FIELDS, {
  NamespaceRules: opt(z.array(z.unknown()).max(0, 'NamespaceRules are not supported')),
});

export const bindingRuleBody = writeBody(BINDING_RULE_FIELDS);

/** A quota; `Used`, which a read answers besides the record, is accepted back and ignored. */
export const quotaBody = writeBody(QUOTA_FIELDS, { Used: opt(z.number()) });

export const loginBody = ciObject({
  AuthMethod: opt(str(128)),
  BearerToken: opt(z.string().max(64 * 1024)),
  // Meta becomes the token's Description: bounded (docs/security.md, "Security"), 64 entries of short text.
  Meta: opt(
    z
      .record(z.string(), z.string().max(512, 'Meta values are at most 512 characters'))
      .refine((m) => Object.keys(m).length <= 64, { message: 'Meta holds at most 64 entries' })
      .refine((m) => Object.keys(m).every((k) => k.length <= 128), { message: 'Meta keys are at most 128 characters' }),
  ),
  ...scopeFields,
});

// ---- Responses ----

const namedLink = z.object({ ID: z.string(), Name: z.string() });
const serviceIdentity = serviceIdentityShape;
const nodeIdentity = nodeIdentityShape;
const templatedPolicy = templatedPolicyShape;

/** A stored field's shape in an answer, by kind. */
function answerKind(kind: FieldKind): z.ZodType {
  switch (kind) {
    case 'boolean':
      return z.boolean();
    case 'index':
      return z.number().int();
    case 'links':
      return z.array(z.object({ ID: z.string() }));
    case 'serviceIdentities':
      return z.array(serviceIdentity);
    case 'nodeIdentities':
      return z.array(nodeIdentity);
    case 'templatedPolicies':
      return z.array(templatedPolicy);
    case 'strings':
      return z.array(z.string());
    case 'config':
      return z.record(z.string(), z.unknown());
    case 'bindVars':
      return z.object({ name: z.string().optional() });
    default:
      return z.string();
  }
}

/** How a view shows a field (domain/records.ts `view`): absent where the mode may leave it out. */
function answerField(spec: FieldSpec): z.ZodType {
  const shown = (spec.view === 'named' ? z.array(namedLink) : answerKind(spec.kind)).describe(spec.doc);
  switch (spec.view ?? 'plain') {
    case 'secret':
      return z.string().describe(`${spec.doc} "<hidden>" for callers without acl:write.`);
    case 'hash':
      return z.string().describe(spec.doc);
    case 'plain':
      return spec.optional ? shown.optional() : shown;
    case 'detail':
      return shown.optional().describe(`${spec.doc} Absent in list items.`);
    default:
      return shown.optional();
  }
}

/** The answer for a record, from its declaration: every field as its view shows it, in the declared order. */
function answerOf<F extends FieldTable>(fields: F): z.ZodObject<AnswerShape<F>> {
  const shape: Record<string, z.ZodType> = {};
  for (const [name, spec] of Object.entries(fields)) if (spec.view !== 'never') shape[name] = answerField(spec);
  return z.object(shape) as unknown as z.ZodObject<AnswerShape<F>>;
}

/** What a view shows of a field of each kind. */
interface AnswerTypes {
  string: string;
  boolean: boolean;
  index: number;
  time: string;
  links: Array<{ ID: string }>;
  serviceIdentities: ServiceIdentity[];
  nodeIdentities: NodeIdentity[];
  templatedPolicies: TemplatedPolicyLink[];
  strings: string[];
  config: Record<string, unknown>;
  tokenLocality: string;
  bindType: string;
  bindVars: { name?: string };
}

type ViewModeOf<S> = S extends { view: infer V } ? V : 'plain';
/** Whether every view shows the field (else it is optional in the answer). */
type AlwaysShown<S> =
  ViewModeOf<S> extends 'secret' | 'hash' ? true : ViewModeOf<S> extends 'plain' ? (S extends { optional: true } ? false : true) : false;
type AnswerValue<S extends FieldSpec> =
  ViewModeOf<S> extends 'secret' | 'hash'
    ? string
    : ViewModeOf<S> extends 'named'
      ? Array<{ ID: string; Name: string }>
      : AnswerTypes[S['kind']];

/** A record's answer schema's shape: named links with their names; a field a view may leave out optional. */
type AnswerShape<F extends FieldTable> = {
  -readonly [K in keyof F]: AlwaysShown<F[K]> extends true ? z.ZodType<AnswerValue<F[K]>> : z.ZodOptional<z.ZodType<AnswerValue<F[K]>>>;
};

export const tokenResponse = answerOf(TOKEN_FIELDS)
  .extend({
    LastUsedTime: z
      .string()
      .optional()
      .describe(
        'When the token\'s secret last authenticated a request (minute resolution; absent when never used): docs/http-api.md, "Last use"',
      ),
  })
  .meta({ id: 'Token' });

export const policyResponse = answerOf(POLICY_FIELDS).meta({ id: 'Policy' });

export const roleResponse = answerOf(ROLE_FIELDS).meta({ id: 'Role' });

export const syntheticPolicyResponse = z
  .object({
    ID: z.string(),
    Name: z.string(),
    Description: z.string(),
    Rules: z.string(),
    Datacenters: z.array(z.string()).optional(),
  })
  .meta({ id: 'SyntheticPolicy' });

export const expandedTokenResponse = tokenResponse
  .extend({
    ExpandedPolicies: z.array(z.union([policyResponse, syntheticPolicyResponse])),
    ExpandedRoles: z.array(roleResponse),
    NamespaceDefaultPolicyIDs: z.array(z.string()).nullable(),
    NamespaceDefaultRoleIDs: z.array(z.string()).nullable(),
    AgentACLDefaultPolicy: z.string(),
    AgentACLDownPolicy: z.string(),
    ResolvedByAgent: z.string(),
  })
  .meta({ id: 'ExpandedToken' });

export const bootstrapResponse = tokenResponse.extend({ ID: z.string().describe('Equal to SecretID') }).meta({ id: 'BootstrapToken' });

export const templatedPolicyResponse = z
  .object({ TemplateName: z.string(), Schema: z.string(), Template: z.string(), Description: z.string() })
  .meta({ id: 'TemplatedPolicy' });

export const templatedPoliciesResponse = z.record(z.string(), templatedPolicyResponse);

export const authMethodResponse = answerOf(AUTH_METHOD_FIELDS).meta({ id: 'AuthMethod' });

export const bindingRuleResponse = answerOf(BINDING_RULE_FIELDS).meta({ id: 'BindingRule' });

const quotaUsed = z.number().int().describe('Live tokens the quota counts in the datacenter that answers: docs/http-api.md, "Quotas"');
export const quotaResponse = answerOf(QUOTA_FIELDS).extend({ Used: quotaUsed }).meta({ id: 'Quota' });
export type QuotaResponse = z.infer<typeof quotaResponse>;

export const errorResponse = z
  .object({
    statusCode: z.number().int(),
    error: z.string(),
    code: z.string().describe('Stable error code; branch on this, not on the message'),
    message: z.string(),
  })
  .meta({ id: 'Error' });

export const deletedResponse = z.boolean().describe('Whether something was deleted');

/**
 * What a restore did (PUT /v1/snapshot). `Restored`: all = global objects and Local tokens, global = global objects
 * only, local-tokens = Local tokens only; `SkippedLocalTokens`: Local tokens left out because a global token here
 * holds their ID or secret.
 */
export const snapshotRestoreResponse = z
  .object({
    Restored: z.enum(['all', 'global', 'local-tokens']),
    Index: z.number().int(),
    Tokens: z.number().int(),
    Policies: z.number().int(),
    Roles: z.number().int(),
    SkippedLocalTokens: z.number().int(),
    Message: z.string(),
  })
  .meta({ id: 'SnapshotRestore' });

export type SnapshotRestoreResponse = z.infer<typeof snapshotRestoreResponse>;
export type TokenResponse = z.infer<typeof tokenResponse>;
export type PolicyResponse = z.infer<typeof policyResponse>;
export type DryRunResponse = z.infer<typeof dryRunResponse>;
export type WhoCanResponse = z.infer<typeof whoCanResponse>;
export type RoleResponse = z.infer<typeof roleResponse>;
export type SyntheticPolicyResponse = z.infer<typeof syntheticPolicyResponse>;
export type ExpandedTokenResponse = z.infer<typeof expandedTokenResponse>;
export type BootstrapResponse = z.infer<typeof bootstrapResponse>;
export type TemplatedPolicyResponse = z.infer<typeof templatedPolicyResponse>;
export type ErrorResponse = z.infer<typeof errorResponse>;
export type AuthMethodResponse = z.infer<typeof authMethodResponse>;
export type BindingRuleResponse = z.infer<typeof bindingRuleResponse>;

// The daemon's own status (agent, replication, servers, the primary followed, health, audit): api/status-schemas.ts.
export * from './status-schemas.js';
