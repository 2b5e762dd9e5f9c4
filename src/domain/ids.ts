import { v4 as uuidv4 } from 'uuid';
import { invalid } from './errors.js';

/** Any UUID version, canonical 8-4-4-4-12 hex form. */
const UUID_RE = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/** IDs with this prefix belong to built-in objects and are never generated or accepted. */
export const RESERVED_PREFIX = '00000000-0000-0000-0000-0000000000';

export const GLOBAL_MANAGEMENT_POLICY_ID = '00000000-0000-0000-0000-000000000001';
export const GLOBAL_READ_ONLY_POLICY_ID = '00000000-0000-0000-0000-000000000002';
export const ANONYMOUS_TOKEN_ID = '00000000-0000-0000-0000-000000000002';
export const ANONYMOUS_TOKEN_SECRET = 'anonymous';

export const DEFAULT_NAMESPACE = 'default';
export const DEFAULT_PARTITION = 'default';

export const isUUID = (value: string): boolean => UUID_RE.test(value);

/**
 * A list filter that names a policy or role (`?policy=`, `?role=`) takes its ID, as Consul's
 * does: anything else would match nothing and answer an empty list that looks like "none".
 */
export function filterID(kind: 'policy' | 'role', value: string | undefined): string | undefined {
  if (value === undefined || value === '') return undefined;
  if (!isUUID(value))
    throw invalid(
      `Invalid ${kind} filter: ${JSON.stringify(value.slice(0, 64))} is not a ${kind} ID (a UUID); read the ${kind} by name for its ID`,
    );
  return value;
}

export const isReservedID = (value: string): boolean => value.toLowerCase().startsWith(RESERVED_PREFIX);

/** A fresh random (v4, crypto-sourced) UUID that is never in the reserved range. */
export function generateID(): string {
  for (;;) {
    const id = uuidv4();
    if (!isReservedID(id)) return id;
  }
}
