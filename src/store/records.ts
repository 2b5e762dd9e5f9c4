import { Packr } from 'msgpackr';
import { z } from 'zod';
import type { AuthMethodRecord, BindingRuleRecord, BootstrapState, PolicyRecord, RoleRecord, TokenRecord } from '../domain/types.js';
import { WatchwordError } from '../domain/errors.js';
import { bindVarsShape, nodeIdentityShape, scopeShape, serviceIdentityShape, templatedPolicyShape } from '../domain/shapes.js';

/** msgpack with plain maps: no record extension, so data stays readable by any decoder. */
const packr = new Packr({ useRecords: false, moreTypes: false });

export const encode = (value: unknown): Uint8Array => packr.pack(value);
export const decodeRaw = (bytes: Uint8Array): unknown => packr.unpack(bytes);

const link = z.object({ ID: z.string() });
const serviceIdentity = serviceIdentityShape;
const nodeIdentity = nodeIdentityShape;
const templatedPolicy = templatedPolicyShape;
const scope = scopeShape;
const indexes = { CreateIndex: z.number().int().nonnegative(), ModifyIndex: z.number().int().nonnegative() };

export const tokenRecordSchema: z.ZodType<TokenRecord> = z.object({
  AccessorID: z.string(),
  SecretID: z.string(),
  Description: z.string(),
  Policies: z.array(link),
  Roles: z.array(link),
  ServiceIdentities: z.array(serviceIdentity),
  NodeIdentities: z.array(nodeIdentity),
  TemplatedPolicies: z.array(templatedPolicy),
  Local: z.boolean(),
  AuthMethod: z.string(),
  AuthMethodNamespace: z.string().optional(),
  ExpirationTime: z.string().optional(),
  CreateTime: z.string(),
  Hash: z.string(),
  ...scope,
  ...indexes,
});

export const policyRecordSchema: z.ZodType<PolicyRecord> = z.object({
  ID: z.string(),
  Name: z.string(),
  Description: z.string(),
  Rules: z.string(),
  Datacenters: z.array(z.string()).optional(),
  Hash: z.string(),
  ...scope,
  ...indexes,
});

export const roleRecordSchema: z.ZodType<RoleRecord> = z.object({
  ID: z.string(),
  Name: z.string(),
  Description: z.string(),
  Policies: z.array(link),
  ServiceIdentities: z.array(serviceIdentity),
  NodeIdentities: z.array(nodeIdentity),
  TemplatedPolicies: z.array(templatedPolicy),
  Hash: z.string(),
  ...scope,
  ...indexes,
});

export const authMethodRecordSchema: z.ZodType<AuthMethodRecord> = z.object({
  Name: z.string(),
  Type: z.string(),
  DisplayName: z.string(),
  Description: z.string(),
  MaxTokenTTL: z.string(),
  TokenLocality: z.enum(['', 'local', 'global']),
  Config: z.record(z.string(), z.unknown()),
  ...scope,
  ...indexes,
});

export const bindingRuleRecordSchema: z.ZodType<BindingRuleRecord> = z.object({
  ID: z.string(),
  Description: z.string(),
  AuthMethod: z.string(),
  Selector: z.string(),
  BindType: z.enum(['service', 'node', 'role', 'policy', 'templated-policy']),
  BindName: z.string(),
  BindVars: bindVarsShape.optional(),
  ...scope,
  ...indexes,
});

export const bootstrapStateSchema: z.ZodType<BootstrapState> = z.object({
  Bootstrapped: z.boolean(),
  ResetIndex: z.number().int().nonnegative(),
});

/** Decodes bytes read back from disk, refusing anything that is not a well-formed record. */
export function decodeWith<T>(schema: z.ZodType<T>, bytes: Uint8Array, what: string): T {
  const parsed = schema.safeParse(decodeRaw(bytes));
  if (!parsed.success) {
    throw new WatchwordError('INTERNAL', `stored ${what} is corrupt`, { cause: parsed.error });
  }
  return parsed.data;
}
