import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { UsageError } from './common.js';
import type { CliIO } from './io.js';

/**
 * The flags `acl token` and `acl role` share: links to policies and roles, service and node
 * identities, templated policies and their variables, as API fields; and `-rules` input.
 */

/** Repeatable flags: absent when not given. */
export interface LinkOptions {
  policyId?: string[];
  policyName?: string[];
  roleId?: string[];
  roleName?: string[];
  serviceIdentity?: string[];
  nodeIdentity?: string[];
  templatedPolicy?: string[];
  var?: string[];
}

export const repeat = (value: string, previous: string[] | undefined) => [...(previous ?? []), value];

export function links(cmd: Command, what: 'token' | 'role'): Command {
  cmd
    .option('--policy-id <ID>', 'link a policy by ID (repeatable)', repeat)
    .option('--policy-name <NAME>', 'link a policy by name (repeatable)', repeat);
  if (what === 'token') {
    cmd
      .option('--role-id <ID>', 'link a role by ID (repeatable)', repeat)
      .option('--role-name <NAME>', 'link a role by name (repeatable)', repeat);
  }
  return cmd
    .option('--service-identity <NAME[:DC1,DC2]>', 'add a service identity, optionally limited to datacenters (repeatable)', repeat)
    .option('--node-identity <NAME:DC>', 'add a node identity in a datacenter (repeatable)', repeat)
    .option('--templated-policy <NAME>', 'add a templated policy such as builtin/service (repeatable)', repeat)
    .option('--var <name:VALUE>', 'a variable for the templated policies, e.g. name:web (repeatable)', repeat);
}

export function serviceIdentity(spec: string): { ServiceName: string; Datacenters?: string[] } {
  const [name, dcs] = spec.split(':', 2) as [string, string | undefined];
  if (!name) throw new UsageError(`-service-identity ${JSON.stringify(spec)}: expected NAME or NAME:DC1,DC2`);
  const list = (dcs ?? '').split(',').filter(Boolean);
  return list.length > 0 ? { ServiceName: name, Datacenters: list } : { ServiceName: name };
}

export function nodeIdentity(spec: string): { NodeName: string; Datacenter: string } {
  const [name, dc] = spec.split(':', 2) as [string, string | undefined];
  if (!name || !dc) throw new UsageError(`-node-identity ${JSON.stringify(spec)}: expected NAME:DATACENTER`);
  return { NodeName: name, Datacenter: dc };
}

export function templateVariables(vars: string[]): { name?: string } {
  const out: { name?: string } = {};
  for (const v of vars) {
    const i = v.indexOf(':');
    if (i <= 0) throw new UsageError(`-var ${JSON.stringify(v)}: expected name:VALUE`);
    const key = v.slice(0, i).toLowerCase();
    if (key !== 'name') throw new UsageError(`-var ${JSON.stringify(v)}: the built-in templates take only "name"`);
    out.name = v.slice(i + 1);
  }
  return out;
}

export function templated(o: LinkOptions & { appendTemplatedPolicy?: string[] }) {
  const vars = templateVariables(o.var ?? []);
  if ((o.var ?? []).length > 0 && (o.templatedPolicy ?? []).length === 0 && (o.appendTemplatedPolicy ?? []).length === 0)
    throw new UsageError('-var needs a -templated-policy');
  return (o.templatedPolicy ?? []).map((name) => ({
    TemplateName: name,
    ...(vars.name !== undefined ? { TemplateVariables: { name: vars.name } } : {}),
  }));
}

/** The links and identities given on the command line, as API fields. */
export function linkFields(o: LinkOptions & { appendTemplatedPolicy?: string[] }) {
  return {
    Policies: [...(o.policyId ?? []).map((ID) => ({ ID })), ...(o.policyName ?? []).map((Name) => ({ Name }))],
    Roles: [...(o.roleId ?? []).map((ID) => ({ ID })), ...(o.roleName ?? []).map((Name) => ({ Name }))],
    ServiceIdentities: (o.serviceIdentity ?? []).map(serviceIdentity),
    NodeIdentities: (o.nodeIdentity ?? []).map(nodeIdentity),
    TemplatedPolicies: templated(o),
  };
}

/** `-rules`: the rules themselves, `@FILE` for a file's, or `-` for standard input's (as Consul's CLI). */
export async function rulesFrom(value: string | undefined, io: CliIO): Promise<string | undefined> {
  if (value === undefined) return undefined;
  if (value === '-') {
    if (!io.readStdin) throw new UsageError('-rules -: there is no standard input to read');
    return io.readStdin();
  }
  if (!value.startsWith('@')) return value;
  try {
    return readFileSync(value.slice(1), 'utf8');
  } catch (err) {
    throw new UsageError(`-rules ${value}: ${(err as Error).message}`);
  }
}

export function need(value: string | undefined, flag: string): string {
  if (!value) throw new UsageError(`missing required flag -${flag}`);
  return value;
}
