import { syntheticPolicyID } from './hash.js';
import type { DecisionSource } from './rules/explain-types.js';
import type { NodeIdentity, ServiceIdentity, TemplatedPolicyLink } from './types.js';

/** A built-in templated policy (Consul's set). */
export interface PolicyTemplate {
  /** Stable ID, `00000000-0000-0000-0000-00000000000N`. */
  TemplateID: string;
  /** Name used in TemplatedPolicies links. */
  TemplateName: string;
  /** Whether the `Name` variable is required. */
  needsName: boolean;
  /** JSON schema of the variables, as text (Consul returns it as a string). */
  Schema: string;
  /** Rules template with `{{.Name}}` placeholders. */
  Template: string;
  Description: string;
}

const NAME_SCHEMA = `{
  "type": "object",
  "properties": {
    "name": { "type": "string", "$ref": "#/definitions/min-length-one" }
  },
  "required": ["name"],
  "definitions": {
    "min-length-one": {
      "type": "string",
      "minLength": 1
    }
  }
}`;

const block = (resource: string, label: string, policy: string, extra = ''): string =>
  `${resource} "${label}" {\n  policy = "${policy}"${extra}\n}`;

export const POLICY_TEMPLATES: readonly PolicyTemplate[] = [
  {
    TemplateID: '00000000-0000-0000-0000-000000000003',
    TemplateName: 'builtin/service',
    needsName: true,
    Schema: NAME_SCHEMA,
    Template: [
      block('service', '{{.Name}}', 'write'),
      block('service', '{{.Name}}-sidecar-proxy', 'write'),
      block('service_prefix', '', 'read'),
      block('node_prefix', '', 'read'),
    ].join('\n'),
    Description:
      'Gives the token or role permissions to register a service and discover services in the catalog. It also gives the specified ' +
      "service's sidecar proxy the permission to discover and route traffic to other services.",
  },
  {
    TemplateID: '00000000-0000-0000-0000-000000000004',
    TemplateName: 'builtin/node',
    needsName: true,
    Schema: NAME_SCHEMA,
    Template: [block('node', '{{.Name}}', 'write'), block('service_prefix', '', 'read')].join('\n'),
    Description:
      'Gives the token or role permissions to register an agent/node into the catalog. A node is typically an agent but can also be a ' +
      'physical server, cloud instance or a container.',
  },
  {
    TemplateID: '00000000-0000-0000-0000-000000000005',
    TemplateName: 'builtin/dns',
    needsName: false,
    Schema: '',
    Template: [block('node_prefix', '', 'read'), block('service_prefix', '', 'read'), block('query_prefix', '', 'read')].join('\n'),
    Description: 'Gives the token or role permissions for the DNS interface to query services in the network.',
  },
  {
    TemplateID: '00000000-0000-0000-0000-000000000006',
    TemplateName: 'builtin/nomad-server',
    needsName: false,
    Schema: '',
    Template: [
      'acl = "write"',
      block('agent_prefix', '', 'read'),
      block('node_prefix', '', 'read'),
      block('service_prefix', '', 'write'),
    ].join('\n'),
    Description: 'Gives the token or role permissions required for integration with a nomad server.',
  },
  {
    TemplateID: '00000000-0000-0000-0000-000000000008',
    TemplateName: 'builtin/api-gateway',
    needsName: true,
    Schema: NAME_SCHEMA,
    Template: [
      'mesh = "read"',
      block('node_prefix', '', 'read'),
      block('service_prefix', '', 'read'),
      block('service', '{{.Name}}', 'write'),
    ].join('\n'),
    Description: 'Gives the token or role permissions for an API gateway.',
  },
  {
    TemplateID: '00000000-0000-0000-0000-000000000009',
    TemplateName: 'builtin/nomad-client',
    needsName: false,
    Schema: '',
    Template: [
      block('agent_prefix', '', 'read'),
      block('node_prefix', '', 'read'),
      block('service_prefix', '', 'write'),
      block('key_prefix', '', 'read'),
    ].join('\n'),
    Description: 'Gives the token or role permissions required for integration with a nomad client.',
  },
];

const BY_NAME = new Map(POLICY_TEMPLATES.map((t) => [t.TemplateName, t]));

export const findTemplate = (name: string): PolicyTemplate | undefined => BY_NAME.get(name);

/**
 * The template's rules for `name`. The name goes inside a quoted string of the rules, escaped as
 * one (a valid identity name needs no escape, so its rendering is unchanged): whatever a stored
 * record holds, it can only ever name a resource, never close the string and add a rule.
 */
export function renderTemplate(template: PolicyTemplate, name: string | undefined): string {
  const quoted = JSON.stringify(name ?? '').slice(1, -1);
  return template.Template.replaceAll('{{.Name}}', () => quoted);
}

/** A rendered policy: never stored, recomputed from identities and templates on read. */
export interface SyntheticPolicy {
  ID: string;
  Name: string;
  Description: string;
  Rules: string;
  Datacenters?: string[];
  /** Set when the record names a template this build does not know: it renders to no rules (the caller logs it). */
  Problem?: string;
}

function synthesize(templateName: string, name: string | undefined, datacenters: string[] | undefined): SyntheticPolicy {
  const template = findTemplate(templateName);
  // Writes refuse unknown templates; one in a stored record (an older or newer build's, a crafted restore) grants nothing.
  const problem = template ? undefined : `unknown templated policy ${JSON.stringify(templateName.slice(0, 128))}: it grants nothing`;
  const rules = template ? renderTemplate(template, name) : '';
  // Datacenters are part of the identity of a rendered policy: the same node name in two
  // datacenters must stay two policies, or one scope would be lost.
  const dcs = datacenters && datacenters.length > 0 ? datacenters : undefined;
  const id = syntheticPolicyID(dcs ? `${rules}\n# datacenters: ${dcs.join(',')}` : rules);
  return {
    ID: id,
    Name: `synthetic-policy-${id}`,
    Description: `synthetic policy generated from templated policy: ${templateName}`,
    Rules: rules,
    ...(dcs ? { Datacenters: dcs } : {}),
    ...(problem ? { Problem: problem } : {}),
  };
}

export const serviceIdentityPolicy = (s: ServiceIdentity): SyntheticPolicy => synthesize('builtin/service', s.ServiceName, s.Datacenters);

export const nodeIdentityPolicy = (n: NodeIdentity): SyntheticPolicy => synthesize('builtin/node', n.NodeName, [n.Datacenter]);

export const templatedPolicy = (t: TemplatedPolicyLink): SyntheticPolicy =>
  synthesize(t.TemplateName, t.TemplateVariables?.name, t.Datacenters);

/** Every synthetic policy an object's identities and templates render to, deduplicated by ID. */
export function syntheticPolicies(g: {
  ServiceIdentities: ServiceIdentity[];
  NodeIdentities: NodeIdentity[];
  TemplatedPolicies: TemplatedPolicyLink[];
}): SyntheticPolicy[] {
  const out = new Map<string, SyntheticPolicy>();
  for (const { policy } of renderedSources(g)) out.set(policy.ID, policy);
  return [...out.values()];
}

/** Each rendered policy with what it was rendered from (explanations name it: `service identity "web"`). */
export function renderedSources(g: {
  ServiceIdentities: ServiceIdentity[];
  NodeIdentities: NodeIdentity[];
  TemplatedPolicies: TemplatedPolicyLink[];
}): Array<{ policy: SyntheticPolicy; source: DecisionSource }> {
  const out: Array<{ policy: SyntheticPolicy; source: DecisionSource }> = [];
  for (const s of g.ServiceIdentities)
    out.push({ policy: serviceIdentityPolicy(s), source: { Source: 'service identity', Name: s.ServiceName } });
  for (const n of g.NodeIdentities) out.push({ policy: nodeIdentityPolicy(n), source: { Source: 'node identity', Name: n.NodeName } });
  for (const t of g.TemplatedPolicies) {
    const name = t.TemplateVariables?.name;
    out.push({
      policy: templatedPolicy(t),
      source: { Source: 'templated policy', Name: name ? `${t.TemplateName} (${name})` : t.TemplateName },
    });
  }
  return out;
}
