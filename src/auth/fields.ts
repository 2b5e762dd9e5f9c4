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
  return [
    ...Object.values(config.ClaimMappings ?? {}).map((n) => `value.${n}`),
    ...Object.values(config.ListClaimMappings ?? {}).map((n) => `list.${n}`),
  ];
}

/**
 * Whether a selector may name `path` for this method. A jwt (or oidc) identity's selectable
 * fields are the maps `value` and `list`, as in Consul: any key under them is valid (a claim
 * that is not mapped simply does not match). A kubernetes identity has fixed fields.
 */
export function selectorAllows(method: Pick<AuthMethodRecord, 'Type' | 'Config'>, path: string): boolean {
  if (method.Type === 'jwt' || method.Type === 'oidc')
    return path === 'value' || path === 'list' || path.startsWith('value.') || path.startsWith('list.');
  return methodFields(method).some((f) => path === f || path.startsWith(`${f}.`) || f.startsWith(`${path}.`));
}

/**
 * A method's Config with its keys spelled as Consul names them. Consul decodes Config keys
 * case-insensitively (its decoder's default: Ansible sends `JWTValidationPubkeys`), still
 * refusing keys that match no field; watchword keeps the canonical spelling, so what is read
 * back is what Consul would show. Two keys for one field are refused rather than one chosen.
 */
export function canonicalConfig(
  config: Record<string, unknown>,
  known: readonly string[],
  type: string,
  bad: (message: string) => Error,
): Record<string, unknown> {
  const byLower = new Map(known.map((k) => [k.toLowerCase(), k]));
  const out: Record<string, unknown> = {};
  const sentAs = new Map<string, string>();
  for (const [key, value] of Object.entries(config)) {
    const canonical = byLower.get(key.toLowerCase());
    if (canonical === undefined) throw bad(`unknown Config field ${JSON.stringify(key)} for type ${JSON.stringify(type)}`);
    const earlier = sentAs.get(canonical);
    if (earlier !== undefined) throw bad(`Config fields ${JSON.stringify(earlier)} and ${JSON.stringify(key)} both set ${canonical}`);
    sentAs.set(canonical, key);
    out[canonical] = value;
  }
  return out;
}
