import { z } from 'zod';
import { parseDuration } from '../domain/duration.js';
import { ciObject } from './body.js';

/**
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
    ctx.addIssue({ code: 'custom', message: `expected a duration such as "90s" or "1h30m" or an integer of nanoseconds, got ${JSON.stringify(v)}` });
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

/** Return-side fields a client may echo back; accepted and ignored. */
const ECHOED = ['CreateIndex', 'ModifyIndex', 'Hash', 'CreateTime'];

export const tokenBody = ciObject(
  {
    AccessorID: opt(str(128)),
    SecretID: opt(str(256)),
    Description: opt(str(MAX_TEXT)),
    Policies: list(linkBody),
    Roles: list(linkBody),
    ServiceIdentities: list(serviceIdentityBody),
    NodeIdentities: list(nodeIdentityBody),
    TemplatedPolicies: list(templatedPolicyBody),
    Local: opt(z.boolean()),
    AuthMethod: opt(str(256)),
    ExpirationTime: opt(rfc3339Time),
    ExpirationTTL: opt(goDuration),
    ...scopeFields,
  },
  ECHOED,
);

export const cloneBody = ciObject({ Description: opt(str(MAX_TEXT)), ...scopeFields });

export const policyBody = ciObject(
  {
    ID: opt(str(128)),
    Name: opt(str(256)),
    Description: opt(str(MAX_TEXT)),
    Rules: opt(z.string().max(512 * 1024)),
    Datacenters: list(str(256)),
    ...scopeFields,
  },
  ECHOED,
);

export const bootstrapBody = ciObject({ BootstrapSecret: opt(str(256)) });

export const roleBody = ciObject(
  {
    ID: opt(str(128)),
    Name: opt(str(1024)),
    Description: opt(str(MAX_TEXT)),
    Policies: list(linkBody),
    ServiceIdentities: list(serviceIdentityBody),
    NodeIdentities: list(nodeIdentityBody),
    TemplatedPolicies: list(templatedPolicyBody),
    ...scopeFields,
  },
  ECHOED,
);

/** Variables for a templated-policy preview: `{"Name": "api"}` (key case-insensitive). */
export const templateVariablesBody = ciObject({ Name: opt(str(512)) });
