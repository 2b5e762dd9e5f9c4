// The binder (Consul's auth/binder.go), pure: what a verified identity is bound to by a
// method's binding rules, and the checks a rule's fields must pass when it is written.
import { methodFields, selectorAllows } from './fields.js';
import type { Identity as VerifiedIdentity } from './identity.js';
import type { WatchwordError } from '../domain/errors.js';
import { SelectorError, parseSelector, selectorPaths } from '../domain/selector.js';
import type { AuthMethodRecord, BindingRuleRecord, NodeIdentity, ServiceIdentity, TemplatedPolicyLink } from '../domain/types.js';

export const BIND_TYPES = ['service', 'node', 'role', 'policy', 'templated-policy'] as const;
export type BindType = (typeof BIND_TYPES)[number];

/** What the rules that matched bind, before links are resolved. */
export interface Bindings {
  services: ServiceIdentity[];
  nodes: NodeIdentity[];
  roles: string[];
  policies: string[];
  templated: TemplatedPolicyLink[];
  /** IDs of the binding rules that matched (for the audit log). */
  matched: string[];
}

/**
 * Every binding of the rules whose selector matched the identity (`matched[i]` for `rules[i]`,
 * as auth/selectors.ts judged them), in rule order: names interpolated from the identity's
 * variables (a rule whose BindName cannot be filled binds nothing); node identities in this
 * datacenter. Links by name are resolved by the caller.
 */
export function bind(
  rules: readonly BindingRuleRecord[],
  matched: readonly boolean[],
  identity: Pick<VerifiedIdentity, 'variables'>,
  datacenter: string,
): Bindings {
  const bindings: Bindings = { services: [], nodes: [], roles: [], policies: [], templated: [], matched: [] };
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i] as BindingRuleRecord;
    if (matched[i] !== true) continue;
    const bound = interpolate(rule.BindName, identity.variables);
    if (bound === undefined || bound === '') continue;
    bindings.matched.push(rule.ID);
    switch (rule.BindType) {
      case 'service':
        bindings.services.push({ ServiceName: bound });
        break;
      case 'node':
        bindings.nodes.push({ NodeName: bound, Datacenter: datacenter });
        break;
      case 'role':
        bindings.roles.push(bound);
        break;
      case 'policy':
        bindings.policies.push(bound);
        break;
      case 'templated-policy': {
        const varName = rule.BindVars?.name === undefined ? undefined : interpolate(rule.BindVars.name, identity.variables);
        bindings.templated.push({ TemplateName: bound, ...(varName ? { TemplateVariables: { name: varName } } : {}) });
        break;
      }
    }
  }
  return bindings;
}

/** `${path}` references in a BindName (or BindVars.name). */
function interpolations(text: string): string[] {
  return [...text.matchAll(/\$\{([^}]*)\}/g)].map((m) => (m[1] as string).trim());
}

/** Replaces `${path}` with the identity's variables; undefined when one is unknown. */
function interpolate(text: string, variables: Record<string, string>): string | undefined {
  let missing = false;
  const out = text.replace(/\$\{([^}]*)\}/g, (_m, path: string) => {
    const v = variables[path.trim()];
    if (v === undefined) missing = true;
    return v ?? '';
  });
  return missing ? undefined : out;
}

/** A selector may only name fields the method's identities have; a BindName only variables it provides. */
export function checkRuleFields(
  method: Pick<AuthMethodRecord, 'Type' | 'Config'>,
  selector: string,
  bindName: string,
  bindVars: { name?: string } | undefined,
  fail: (message: string) => WatchwordError,
): void {
  const fields = new Set(methodFields(method));
  const provides = method.Type === 'jwt' ? 'value.<claim>, list.<claim>' : [...fields].join(', ') || 'none';
  if (selector.trim() !== '') {
    let paths: string[];
    try {
      paths = selectorPaths(parseSelector(selector));
    } catch (err) {
      if (err instanceof SelectorError) throw fail(`invalid Selector: ${err.message}`);
      throw err;
    }
    for (const p of paths) {
      if (!selectorAllows(method, p))
        throw fail(`invalid Selector: unknown field ${JSON.stringify(p)} (this auth method provides: ${provides})`);
    }
  }
  for (const text of [bindName, bindVars?.name ?? '']) {
    for (const ref of interpolations(text))
      if (!fields.has(ref))
        throw fail(`invalid BindName: unknown variable \${${ref}} (this auth method provides: ${[...fields].join(', ') || 'none'})`);
  }
}

/** Longest claim value a login accepts (8 KiB). */
export const MAX_CLAIM_CHARS = 8192;

/** The selector path of the first claim value longer than MAX_CLAIM_CHARS, if any. */
export function longClaim(selectable: Record<string, unknown>, path = ''): string | undefined {
  for (const [k, v] of Object.entries(selectable)) {
    const at = path ? `${path}.${k}` : k;
    if (typeof v === 'string' && v.length > MAX_CLAIM_CHARS) return at;
    if (Array.isArray(v) && v.some((x) => typeof x === 'string' && x.length > MAX_CLAIM_CHARS)) return at;
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
      const inner = longClaim(v as Record<string, unknown>, at);
      if (inner !== undefined) return inner;
    }
  }
  return undefined;
}
