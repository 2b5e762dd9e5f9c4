import { invalid } from '../domain/errors.js';
import { DEFAULT_NAMESPACE, DEFAULT_PARTITION } from '../domain/ids.js';
import type { Scope } from '../domain/types.js';
import type { Identity } from './acl-resolver.js';

const NAME_RE = /^[a-z0-9]([a-z0-9-]{0,62})$/;

/**
 * Namespace and partition a request names outside its body: `?ns=` / `?partition=`
 * first, then the `X-Service-Namespace` / `X-Service-Partition` headers (HTTP layer).
 */
export interface ScopeHints {
  namespace?: string;
  partition?: string;
}

/** Body fields that choose a scope (create and update bodies). */
export interface BodyScope {
  Namespace?: string;
  Partition?: string;
}

export const WILDCARD = '*';

/** The record when it lives in this scope, else undefined (an object elsewhere is not found here). */
export const inScope = <R extends Scope>(r: R | undefined, scope: Scope): R | undefined =>
  r && r.Namespace === scope.Namespace && r.Partition === scope.Partition ? r : undefined;

export function checkScopeName(kind: 'namespace' | 'partition', value: string): string {
  if (!NAME_RE.test(value)) {
    throw invalid(
      `Invalid ${kind} name ${JSON.stringify(value)}: use 1 to 63 lowercase letters, digits and '-', starting with a letter or digit`,
    );
  }
  return value;
}

const nonEmpty = (v: string | undefined): string | undefined => (v === undefined || v === '' ? undefined : v);

/**
 * The scope of a request: body field > query/header hint > the request token's own >
 * `default`. With `allowWildcard`, a namespace of `*` comes back as '*' (lists only).
 */
export function selectScope(
  identity: Pick<Identity, 'token'> | undefined,
  hints: ScopeHints,
  body?: BodyScope,
  allowWildcard = false,
): Scope {
  const partition = nonEmpty(body?.Partition) ?? nonEmpty(hints.partition) ?? identity?.token.Partition ?? DEFAULT_PARTITION;
  const namespace = nonEmpty(body?.Namespace) ?? nonEmpty(hints.namespace) ?? identity?.token.Namespace ?? DEFAULT_NAMESPACE;
  return {
    Partition: checkScopeName('partition', partition),
    Namespace: allowWildcard && namespace === WILDCARD ? WILDCARD : checkScopeName('namespace', namespace),
  };
}
