/**
 * Why a check was answered as it was (docs/operator-insight.md, "Explain a decision"): the source that
 * decided, the rule as written, and the rule that lost to it.
 */

/** The kinds of source a rule can come from. */
export type SourceKind =
  | 'policy'
  | 'role'
  | 'service identity'
  | 'node identity'
  | 'templated policy'
  | 'global-management'
  | 'default_policy';

/** Where a rule came from: a policy (ID, Name), a role (its ID and Name, and the policy or identity of it), an identity, a template. */
export interface DecisionSource {
  Source: SourceKind;
  ID?: string;
  Name?: string;
  /** A role's source: the policy of the role that holds the rule. */
  Policy?: { ID: string; Name: string };
  /** A role's source: the identity or template of the role that renders the rule (`service identity "web"`). */
  Identity?: string;
}

/** A rule with its source, as the explanation names it. */
export interface ExplainedRule extends DecisionSource {
  /** The rule as written in its policy (`service_prefix "we" { policy = "write" }`); the default policy as `default_policy = "deny"`. */
  Rule: string;
  /** The block of the policy the rule sits in (`namespace "team"`), when not its top level. */
  Block?: string;
}

/** The reason of one answer: what decided and what lost. */
export interface Reason extends ExplainedRule {
  /** The rule that lost: a prefix rule beaten by an exact one, a grant beaten by a deny (or a weaker grant by a stronger one). */
  Lost?: ExplainedRule;
}

/** One line for logs and 403 messages: `policy "web-readers" (ID …): service_prefix "" { policy = "read" }`. */
export function reasonText(r: Reason): string {
  const rule = (x: ExplainedRule): string => `${sourceText(x)}: ${x.Block ? `${x.Block} { ${x.Rule} }` : x.Rule}`;
  return r.Lost ? `${rule(r)}, over ${rule(r.Lost)}` : rule(r);
}

export function sourceText(s: DecisionSource): string {
  switch (s.Source) {
    case 'default_policy':
      return 'the default policy';
    case 'role': {
      const inner = s.Policy ? ` policy ${JSON.stringify(s.Policy.Name)}` : s.Identity ? ` ${s.Identity}` : '';
      return `role ${JSON.stringify(s.Name ?? '')}${inner}`;
    }
    case 'policy':
    case 'global-management':
      return `policy ${JSON.stringify(s.Name ?? '')}`;
    default:
      return `${s.Source} ${JSON.stringify(s.Name ?? '')}`;
  }
}
