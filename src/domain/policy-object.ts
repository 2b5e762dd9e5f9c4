import { isBuiltinPolicyID } from './builtins.js';
import { invalid, notPermitted } from './errors.js';
import { checkDatacenterNames } from './grants.js';
import { POLICY_NAME_INVALID, POLICY_NAME_MAX } from './records.js';
import { PolicyRulesError, parsePolicyRules, type ScopeRules } from './rules/policy.js';
import type { PolicyRecord } from './types.js';

const POLICY_NAME_RE = /^[A-Za-z0-9\-_]+\/?[A-Za-z0-9\-_]*$/;

/** Checks a policy name: 1..128, one optional inner `/`, no `builtin/` prefix. */
export function checkPolicyName(name: string): void {
  if (name === '') throw invalid('Invalid Policy: no Name is set');
  if (name.length > POLICY_NAME_MAX || !POLICY_NAME_RE.test(name)) throw invalid(POLICY_NAME_INVALID);
  if (name.toLowerCase().startsWith('builtin/')) {
    throw invalid('Invalid Policy: the "builtin/" name prefix is reserved for built-in policies');
  }
}

/** Parses rules, turning parse and validation failures into 400s. */
export function checkPolicyRules(rules: string): ScopeRules {
  try {
    return parsePolicyRules(rules);
  } catch (err) {
    if (err instanceof PolicyRulesError) throw invalid(err.message);
    throw err;
  }
}

export function checkPolicyDatacenters(dcs: readonly string[]): void {
  checkDatacenterNames(dcs, 'Policy');
}

/**
 * The protections of the built-in policies: Name and Description may change, Rules and
 * Datacenters may not.
 */
export function checkBuiltinPolicyUpdate(existing: PolicyRecord, next: { Name: string; Rules: string; Datacenters?: string[] }): void {
  if (!isBuiltinPolicyID(existing.ID)) return;
  if (next.Rules !== existing.Rules) {
    throw notPermitted(`Changing the Rules for the builtin ${existing.Name} policy is not permitted`);
  }
  if ((next.Datacenters ?? []).length > 0) {
    throw notPermitted(`Changing the Datacenters of the builtin ${existing.Name} policy is not permitted`);
  }
}
