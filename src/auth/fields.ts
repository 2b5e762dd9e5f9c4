import type { AuthMethodRecord } from '../domain/types.js';

export const METHOD_TYPES = ['jwt', 'kubernetes'] as const;

/** Identity fields of a kubernetes method: the reviewed service account. */
export const KUBERNETES_FIELDS = ['serviceaccount.name', 'serviceaccount.namespace', 'serviceaccount.uid'];

/**
 * Dotted paths a method's binding rules may select on and interpolate: `value.<name>`
 * for each claim mapping and `list.<name>` for each list claim mapping (jwt), the
 * service account's fields (kubernetes). Kept apart from the verifiers, so writing a
 * rule does not load the JOSE library.
 */
export function methodFields(method: Pick<AuthMethodRecord, 'Type' | 'Config'>): string[] {
  if (method.Type !== 'jwt') return KUBERNETES_FIELDS;
  const config = method.Config as { ClaimMappings?: Record<string, string>; ListClaimMappings?: Record<string, string> };
  return [...Object.values(config.ClaimMappings ?? {}).map((n) => `value.${n}`), ...Object.values(config.ListClaimMappings ?? {}).map((n) => `list.${n}`)];
}

/**
 * Whether a selector may name `path` for this method. A jwt (or oidc) identity's selectable
 * fields are the maps `value` and `list`, as in Consul: any key under them is valid (a claim
 * that is not mapped simply does not match). A kubernetes identity has fixed fields.
 */
export function selectorAllows(method: Pick<AuthMethodRecord, 'Type' | 'Config'>, path: string): boolean {
  if (method.Type === 'jwt' || method.Type === 'oidc') return path === 'value' || path === 'list' || path.startsWith('value.') || path.startsWith('list.');
  return methodFields(method).some((f) => path === f || path.startsWith(`${f}.`) || f.startsWith(`${path}.`));
}
