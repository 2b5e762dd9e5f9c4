import { Packr } from 'msgpackr';
import { z } from 'zod';
import type {
  AuthMethodRecord,
  BindingRuleRecord,
  BootstrapState,
  PolicyRecord,
  QuotaRecord,
  RoleRecord,
  TokenRecord,
} from '../domain/types.js';
import { WatchwordError } from '../domain/errors.js';
import { AUTH_METHOD_FIELDS, BINDING_RULE_FIELDS, POLICY_FIELDS, QUOTA_FIELDS, ROLE_FIELDS, TOKEN_FIELDS } from '../domain/records.js';
import { recordWireSchema } from '../domain/record-check.js';

/** msgpack with plain maps: no record extension, so data stays readable by any decoder. */
const packr = new Packr({ useRecords: false, moreTypes: false });

export const encode = (value: unknown): Uint8Array => packr.pack(value);
export const decodeRaw = (bytes: Uint8Array): unknown => packr.unpack(bytes);

/**
 * Each record's schema as frames and snapshot files check it (domain/records.ts): an unknown or
 * malformed field is refused, never stripped; the record is checked in place, not copied.
 */
export const tokenRecordSchema: z.ZodType<TokenRecord> = recordWireSchema(TOKEN_FIELDS);
export const policyRecordSchema: z.ZodType<PolicyRecord> = recordWireSchema(POLICY_FIELDS);
export const roleRecordSchema: z.ZodType<RoleRecord> = recordWireSchema(ROLE_FIELDS);
export const authMethodRecordSchema: z.ZodType<AuthMethodRecord> = recordWireSchema(AUTH_METHOD_FIELDS);
export const bindingRuleRecordSchema: z.ZodType<BindingRuleRecord> = recordWireSchema(BINDING_RULE_FIELDS);
export const quotaRecordSchema: z.ZodType<QuotaRecord> = recordWireSchema(QUOTA_FIELDS);

export const bootstrapStateSchema: z.ZodType<BootstrapState> = z.strictObject({
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
