import { rfc3339 } from './expiry.js';
import { tokenHash } from './hash.js';
import type { ContentOf, TOKEN_FIELDS } from './records.js';
import type { Scope, TokenRecord } from './types.js';

/** What a token grants and says about itself: the fields its Hash covers (domain/records.ts marks them). */
export type TokenContent = ContentOf<typeof TOKEN_FIELDS>;

export interface NewToken {
  AccessorID: string;
  SecretID: string;
  content: TokenContent;
  /** Fields a write takes as given (domain/records.ts `input`), from its body or the token cloned. */
  given?: Partial<TokenRecord>;
  /** Expiration time, ms since the epoch; absent for a token that never expires. */
  expires?: number;
  /** Creation time, ms since the epoch. */
  now: number;
  scope: Scope;
}

/** A new token record (the store stamps its indexes): the one place that decides what a fresh token holds. */
export function newTokenRecord(t: NewToken): Omit<TokenRecord, 'CreateIndex' | 'ModifyIndex'> {
  const record = {
    ...t.given,
    AccessorID: t.AccessorID,
    SecretID: t.SecretID,
    ...t.content,
    AuthMethod: '',
    ...(t.expires !== undefined ? { ExpirationTime: rfc3339(t.expires) } : {}),
    CreateTime: rfc3339(t.now),
    Namespace: t.scope.Namespace,
    Partition: t.scope.Partition,
  };
  // Over the record as written, so that every field the declaration hashes counts (the given ones too).
  return { ...record, Hash: tokenHash(record) };
}

/**
 * A token that holds only `links`, in `place`: how a role or a policy is judged as what it grants
 * to a token of its place linking it (who can, the grant limit). Never stored.
 */
export function tokenHolding(
  accessor: string,
  place: { Namespace: string; Partition: string },
  links: Partial<Pick<TokenRecord, 'Policies' | 'Roles'>>,
): TokenRecord {
  return {
    AccessorID: accessor,
    SecretID: '',
    Description: '',
    Policies: links.Policies ?? [],
    Roles: links.Roles ?? [],
    ServiceIdentities: [],
    NodeIdentities: [],
    TemplatedPolicies: [],
    Local: false,
    AuthMethod: '',
    CreateTime: '',
    Hash: '',
    Namespace: place.Namespace,
    Partition: place.Partition,
    CreateIndex: 0,
    ModifyIndex: 0,
  };
}
