import type { TemplatedPolicyResponse } from '../api/schemas.js';
import { notFound } from '../domain/errors.js';
import { normalizeTemplatedPolicies } from '../domain/grants.js';
import { POLICY_TEMPLATES, type PolicyTemplate, type SyntheticPolicy, findTemplate, templatedPolicy } from '../domain/templates.js';
import type { AclResolver } from './acl-resolver.js';
import type { RequestContext } from './context.js';
import { authorize } from './permissions.js';

/** A template as the API shows it (Consul's shape). */
export type TemplatedPolicyView = TemplatedPolicyResponse;

const view = (t: PolicyTemplate): TemplatedPolicyView => ({
  TemplateName: t.TemplateName,
  Schema: t.Schema,
  Template: t.Template,
  Description: t.Description,
});

export class TemplatedPolicyService {
  constructor(private readonly resolver: AclResolver) {}

  async list(ctx: RequestContext): Promise<Record<string, TemplatedPolicyView>> {
    await authorize(this.resolver, ctx, 'read');
    return Object.fromEntries(POLICY_TEMPLATES.map((t) => [t.TemplateName, view(t)]));
  }

  private find(name: string): PolicyTemplate {
    const template = findTemplate(name);
    if (!template) throw notFound(`Cannot find templated policy ${JSON.stringify(name)}`);
    return template;
  }

  async read(ctx: RequestContext, name: string): Promise<TemplatedPolicyView> {
    await authorize(this.resolver, ctx, 'read');
    return view(this.find(name));
  }

  /** Renders the template with the given variables, checked exactly as on a token or role. */
  async preview(ctx: RequestContext, name: string, variables: { Name?: string }): Promise<SyntheticPolicy> {
    await authorize(this.resolver, ctx, 'read');
    this.find(name);
    const [link] = normalizeTemplatedPolicies(
      [{ TemplateName: name, TemplateVariables: variables.Name === undefined ? {} : { Name: variables.Name } }],
      'token',
      false,
    );
    return templatedPolicy(link as NonNullable<typeof link>);
  }
}
