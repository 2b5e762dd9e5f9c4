import type { TokenAuthorizerResponse } from '../api/schemas.js';
import { type ApplicablePolicy, Authorizer as CompiledAuthorizer } from '../domain/rules/authorizer.js';
import { type ScopeRules, parsePolicyRules } from '../domain/rules/policy.js';

/** Monotonic milliseconds: expiries are judged on this clock, not the wall clock, which may be set back. */
export const monotonic = (): number => performance.now();

/** Parsed rules kept at most, by their text. */
const MAX_PARSED = 10_000;

/**
 * Token views compiled with the daemon's own rules engine (client/authorizer.ts), each policy's
 * rules parsed once and shared by every token holding that policy.
 */
export class ViewCompiler {
  private readonly parsed = new Map<string, ScopeRules>();

  /** The view's authorizer, and when its secret stops authenticating on the monotonic clock. */
  compile(view: TokenAuthorizerResponse): { authorizer: CompiledAuthorizer; expiresAt: number } {
    const policies: ApplicablePolicy[] = view.Policies.map((p) => ({
      rules: this.rules(p.Rules),
      namespace: p.Namespace,
      partition: p.Partition,
      builtin: p.Builtin,
    }));
    return { authorizer: new CompiledAuthorizer(view.Namespace, view.Partition, policies, view.DefaultPolicy), expiresAt: endOf(view) };
  }

  /** A policy's rules; rules that cannot be parsed grant nothing. */
  private rules(text: string): ScopeRules {
    let rules = this.parsed.get(text);
    if (rules === undefined) {
      try {
        rules = parsePolicyRules(text);
      } catch {
        rules = { flags: {}, resources: [], namespaces: [], partitions: [] };
      }
      if (this.parsed.size >= MAX_PARSED) this.parsed.clear();
      this.parsed.set(text, rules);
    }
    return rules;
  }
}

/**
 * When a view's secret stops authenticating, on the monotonic clock: from the seconds left the
 * daemon counted (its clock, not ours), else from the expiry it names; one that cannot be read
 * is taken as passed.
 */
function endOf(view: TokenAuthorizerResponse): number {
  if (view.SecondsLeft !== undefined) return monotonic() + Math.max(0, view.SecondsLeft) * 1000;
  if (view.ExpirationTime === undefined) return Number.POSITIVE_INFINITY;
  const at = Date.parse(view.ExpirationTime);
  return Number.isNaN(at) ? 0 : monotonic() + (at - Date.now());
}
