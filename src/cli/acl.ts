import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import type { TokenInput, WatchwordClient } from '../client/index.js';
import { authCommands } from './auth.js';
import { type CommonOptions, UsageError, common, meta, print, run } from './common.js';
import { policyID, roleID, tokenID } from './ids.js';
import { type CliIO, ioOf } from './io.js';
import {
  formatPolicy,
  formatPolicyList,
  formatReplication,
  formatRole,
  formatRoleList,
  formatTemplate,
  formatTemplateList,
  formatToken,
  formatTokenList,
} from './output.js';

/** Repeatable flags: absent when not given. */
interface LinkOptions {
  policyId?: string[];
  policyName?: string[];
  roleId?: string[];
  roleName?: string[];
  serviceIdentity?: string[];
  nodeIdentity?: string[];
  templatedPolicy?: string[];
  var?: string[];
}

const repeat = (value: string, previous: string[] | undefined) => [...(previous ?? []), value];

function links(cmd: Command, what: 'token' | 'role'): Command {
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

function templateVariables(vars: string[]): { name?: string } {
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

function templated(o: LinkOptions & { appendTemplatedPolicy?: string[] }) {
  const vars = templateVariables(o.var ?? []);
  if ((o.var ?? []).length > 0 && (o.templatedPolicy ?? []).length === 0 && (o.appendTemplatedPolicy ?? []).length === 0)
    throw new UsageError('-var needs a -templated-policy');
  return (o.templatedPolicy ?? []).map((name) => ({
    TemplateName: name,
    ...(vars.name !== undefined ? { TemplateVariables: { name: vars.name } } : {}),
  }));
}

/** The links and identities given on the command line, as API fields. */
function linkFields(o: LinkOptions & { appendTemplatedPolicy?: string[] }) {
  return {
    Policies: [...(o.policyId ?? []).map((ID) => ({ ID })), ...(o.policyName ?? []).map((Name) => ({ Name }))],
    Roles: [...(o.roleId ?? []).map((ID) => ({ ID })), ...(o.roleName ?? []).map((Name) => ({ Name }))],
    ServiceIdentities: (o.serviceIdentity ?? []).map(serviceIdentity),
    NodeIdentities: (o.nodeIdentity ?? []).map(nodeIdentity),
    TemplatedPolicies: templated(o),
  };
}

/** `-rules`: the rules themselves, `@FILE` for a file's, or `-` for standard input's (as Consul's CLI). */
async function rulesFrom(value: string | undefined, io: CliIO): Promise<string | undefined> {
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

function need(value: string | undefined, flag: string): string {
  if (!value) throw new UsageError(`missing required flag -${flag}`);
  return value;
}

function tokenCommands(acl: Command): void {
  const token = acl.command('token').description('create, read, update, clone, delete and list tokens');

  interface CreateOptions extends CommonOptions, LinkOptions {
    description?: string;
    expiresTtl?: string;
    local?: boolean;
    accessor?: string;
    secret?: string;
  }
  links(meta(common(token.command('create').description('create a token'))), 'token')
    .option('--description <TEXT>', 'description of the token')
    .option('--expires-ttl <DURATION>', 'lifetime, e.g. 1h (between the configured minimum and maximum)')
    .option('--local', 'keep the token in this datacenter (not replicated)')
    .option('--accessor <UUID>', 'choose the AccessorID (generated by default)')
    .option('--secret <UUID>', 'choose the SecretID (generated by default)')
    .action(
      run<CreateOptions>(async (o, c) => {
        const body: TokenInput = {
          ...linkFields(o),
          ...(o.description !== undefined ? { Description: o.description } : {}),
          ...(o.expiresTtl ? { ExpirationTTL: o.expiresTtl } : {}),
          ...(o.local ? { Local: true } : {}),
          ...(o.accessor ? { AccessorID: o.accessor } : {}),
          ...(o.secret ? { SecretID: o.secret } : {}),
        };
        print(o, await c.tokens.create(body), formatToken);
      }),
    );

  meta(
    common(
      token.command('read').description('read a token by AccessorID (or a unique prefix of it), or with -self the token you are using'),
    ),
  )
    .option('--id <ACCESSOR>', 'AccessorID of the token, or a unique prefix of it')
    .option('--self', 'read the token the request is sent with (-token, -token-file or the environment)')
    .option('--expanded', 'also show the policies and roles behind the token')
    .action(
      run<CommonOptions & { id?: string; self?: boolean; expanded?: boolean }>(async (o, c) => {
        if (o.self && o.id) throw new UsageError('give -id or -self, not both');
        if (o.self) {
          print(o, (await c.tokens.readSelf()).value, formatToken);
          return;
        }
        const id = await tokenID(c, need(o.id, 'id (or -self)'));
        if (o.expanded) {
          const t = (await c.tokens.readExpanded(id)).value;
          print(
            o,
            t,
            (v, m) => `${formatToken(v, m)}\nExpanded Policies:\n${v.ExpandedPolicies.map((p) => `   ${p.ID} - ${p.Name}`).join('\n')}`,
          );
        } else {
          print(o, (await c.tokens.read(id)).value, formatToken);
        }
      }),
    );

  meta(common(token.command('read-self').description('read the token the request is sent with (the same as read -self)'))).action(
    run<CommonOptions>(async (o, c) => print(o, (await c.tokens.readSelf()).value, formatToken)),
  );

  interface UpdateOptions extends CommonOptions, LinkOptions {
    id?: string;
    description?: string;
    appendPolicyId?: string[];
    appendPolicyName?: string[];
    appendRoleId?: string[];
    appendRoleName?: string[];
    appendServiceIdentity?: string[];
    appendNodeIdentity?: string[];
    appendTemplatedPolicy?: string[];
    mergePolicies?: boolean;
    mergeRoles?: boolean;
    mergeServiceIdentities?: boolean;
    mergeNodeIdentities?: boolean;
    mergeTemplatedPolicies?: boolean;
  }
  links(
    meta(
      common(
        token
          .command('update')
          .description(
            'update a token: kinds of links not given are kept; given ones replace the current ones; -append-… ones are added to them',
          ),
      ),
    ),
    'token',
  )
    .option('--id <ACCESSOR>', 'AccessorID of the token, or a unique prefix of it')
    .option('--description <TEXT>', 'new description (kept when absent)')
    .option('--append-policy-id <ID>', 'add a policy by ID to those the token has (repeatable)', repeat)
    .option('--append-policy-name <NAME>', 'add a policy by name to those the token has (repeatable)', repeat)
    .option('--append-role-id <ID>', 'add a role by ID to those the token has (repeatable)', repeat)
    .option('--append-role-name <NAME>', 'add a role by name to those the token has (repeatable)', repeat)
    .option('--append-service-identity <NAME[:DC1,DC2]>', 'add a service identity to those the token has (repeatable)', repeat)
    .option('--append-node-identity <NAME:DC>', 'add a node identity to those the token has (repeatable)', repeat)
    .option('--append-templated-policy <NAME>', 'add a templated policy (with -var) to those the token has (repeatable)', repeat)
    .option('--merge-policies', 'add the given policies to the current ones')
    .option('--merge-roles', 'add the given roles to the current ones')
    .option('--merge-service-identities', 'add the given service identities to the current ones')
    .option('--merge-node-identities', 'add the given node identities to the current ones')
    .option('--merge-templated-policies', 'add the given templated policies to the current ones')
    .action(
      run<UpdateOptions>(async (o, c) => {
        const id = await tokenID(c, need(o.id, 'id'));
        const current = (await c.tokens.read(id)).value;
        const given = linkFields(o);
        const appended = linkFields({
          policyId: o.appendPolicyId,
          policyName: o.appendPolicyName,
          roleId: o.appendRoleId,
          roleName: o.appendRoleName,
          serviceIdentity: o.appendServiceIdentity,
          nodeIdentity: o.appendNodeIdentity,
          templatedPolicy: o.appendTemplatedPolicy,
          var: o.appendTemplatedPolicy?.length ? o.var : undefined,
        });
        // A kind not named on the command line stays as it is; a named one replaces what the
        // token has (or adds to it with its -merge flag); -append-… ones are added to the result.
        const keep = <T>(merge: boolean | undefined, now: T[] | undefined, added: T[], more: T[]) => [
          ...(added.length === 0 || merge ? [...(now ?? []), ...added] : added),
          ...more,
        ];
        const body: TokenInput = {
          Description: o.description ?? current.Description,
          Local: current.Local,
          Policies: keep(
            o.mergePolicies,
            current.Policies?.map((p) => ({ ID: p.ID })),
            given.Policies,
            appended.Policies,
          ),
          Roles: keep(
            o.mergeRoles,
            current.Roles?.map((r) => ({ ID: r.ID })),
            given.Roles,
            appended.Roles,
          ),
          ServiceIdentities: keep(o.mergeServiceIdentities, current.ServiceIdentities, given.ServiceIdentities, appended.ServiceIdentities),
          NodeIdentities: keep(o.mergeNodeIdentities, current.NodeIdentities, given.NodeIdentities, appended.NodeIdentities),
          TemplatedPolicies: keep(o.mergeTemplatedPolicies, current.TemplatedPolicies, given.TemplatedPolicies, appended.TemplatedPolicies),
        };
        print(o, await c.tokens.update(id, body), formatToken);
      }),
    );

  meta(common(token.command('clone').description('clone a token (new IDs, same links)')))
    .option('--id <ACCESSOR>', 'AccessorID of the token to clone, or a unique prefix of it')
    .option('--description <TEXT>', 'description of the clone (the source’s by default)')
    .action(
      run<CommonOptions & { id?: string; description?: string }>(async (o, c) => {
        print(
          o,
          await c.tokens.clone(await tokenID(c, need(o.id, 'id')), o.description ? { Description: o.description } : {}),
          formatToken,
        );
      }),
    );

  common(token.command('delete').description('delete a token'))
    .option('--id <ACCESSOR>', 'AccessorID of the token, or a unique prefix of it')
    .action(
      run<CommonOptions & { id?: string }>(async (o, c) => {
        const id = await tokenID(c, need(o.id, 'id'));
        const deleted = await c.tokens.delete(id);
        print(o, deleted, (d) => (d ? `Token "${id}" deleted successfully` : `Token "${id}" not found; nothing deleted`));
      }),
    );

  common(token.command('list').description('list tokens, optionally filtered'))
    .option('--policy-id <ID>', 'only tokens linked to this policy')
    .option('--role-id <ID>', 'only tokens linked to this role')
    .option('--service-name <NAME>', 'only tokens with this service identity')
    .option('--auth-method <NAME>', 'only tokens made by this auth method')
    .action(
      run<CommonOptions & { policyId?: string; roleId?: string; serviceName?: string; authMethod?: string }>(async (o, c) => {
        const filter = {
          ...(o.policyId ? { policy: o.policyId } : {}),
          ...(o.roleId ? { role: o.roleId } : {}),
          ...(o.serviceName ? { servicename: o.serviceName } : {}),
          ...(o.authMethod ? { authmethod: o.authMethod } : {}),
        };
        print(o, (await c.tokens.list(filter)).value, formatTokenList);
      }),
    );
}

function roleCommands(acl: Command): void {
  const role = acl.command('role').description('create, read, update, delete and list roles');
  interface RoleOptions extends CommonOptions, LinkOptions {
    id?: string;
    name?: string;
    description?: string;
    merge?: boolean;
  }
  const byIdOrName = async (o: RoleOptions, c: WatchwordClient) =>
    o.id ? (await c.roles.read(await roleID(c, o.id))).value : (await c.roles.readByName(need(o.name, 'id or -name'))).value;

  links(meta(common(role.command('create').description('create a role'))), 'role')
    .option('--name <NAME>', 'name of the role')
    .option('--description <TEXT>', 'description of the role')
    .action(
      run<RoleOptions>(async (o, c) => {
        const { Roles: _r, ...fields } = linkFields(o);
        print(
          o,
          await c.roles.create({
            Name: need(o.name, 'name'),
            ...(o.description !== undefined ? { Description: o.description } : {}),
            ...fields,
          }),
          formatRole,
        );
      }),
    );

  meta(common(role.command('read').description('read a role by ID (or a unique prefix of it) or name')))
    .option('--id <ID>', 'ID of the role, or a unique prefix of it')
    .option('--name <NAME>', 'name of the role')
    .action(run<RoleOptions>(async (o, c) => print(o, await byIdOrName(o, c), formatRole)));

  links(
    meta(common(role.command('update').description('update a role: given links are added to the current ones unless -no-merge'))),
    'role',
  )
    .option('--id <ID>', 'ID of the role, or a unique prefix of it')
    .option('--name <NAME>', 'new name (kept when absent)')
    .option('--description <TEXT>', 'new description (kept when absent)')
    .option('--no-merge', 'replace the links and identities instead of adding to them')
    .action(
      run<RoleOptions>(async (o, c) => {
        const current = (await c.roles.read(await roleID(c, need(o.id, 'id')))).value;
        const { Roles: _r, ...given } = linkFields(o);
        const merge = o.merge !== false;
        const keep = <T>(now: T[] | undefined, added: T[]) => [...(merge ? (now ?? []) : []), ...added];
        print(
          o,
          await c.roles.update(current.ID, {
            Name: o.name ?? current.Name,
            Description: o.description ?? current.Description,
            Policies: keep(
              current.Policies?.map((p) => ({ ID: p.ID })),
              given.Policies,
            ),
            ServiceIdentities: keep(current.ServiceIdentities, given.ServiceIdentities),
            NodeIdentities: keep(current.NodeIdentities, given.NodeIdentities),
            TemplatedPolicies: keep(current.TemplatedPolicies, given.TemplatedPolicies),
          }),
          formatRole,
        );
      }),
    );

  common(role.command('delete').description('delete a role by ID (or a unique prefix of it) or name'))
    .option('--id <ID>', 'ID of the role, or a unique prefix of it')
    .option('--name <NAME>', 'name of the role')
    .action(
      run<RoleOptions>(async (o, c) => {
        const id = o.id ? await roleID(c, o.id) : (await byIdOrName(o, c)).ID;
        const deleted = await c.roles.delete(id);
        print(o, deleted, (d) => (d ? `Role "${id}" deleted successfully` : `Role "${id}" not found; nothing deleted`));
      }),
    );

  common(role.command('list').description('list roles'))
    .option('--policy-id <ID>', 'only roles linked to this policy')
    .action(
      run<CommonOptions & { policyId?: string }>(async (o, c) =>
        print(o, (await c.roles.list(o.policyId ? { policy: o.policyId } : {})).value, formatRoleList),
      ),
    );
}

function policyCommands(acl: Command): void {
  const policy = acl.command('policy').description('create, read, update, delete and list policies');
  interface PolicyOptions extends CommonOptions {
    id?: string;
    name?: string;
    description?: string;
    rules?: string;
    validDatacenter?: string[];
    merge?: boolean;
  }
  const byIdOrName = async (o: PolicyOptions, c: WatchwordClient) =>
    o.id ? (await c.policies.read(await policyID(c, o.id))).value : (await c.policies.readByName(need(o.name, 'id or -name'))).value;

  meta(common(policy.command('create').description('create a policy')))
    .option('--name <NAME>', 'name of the policy')
    .option('--description <TEXT>', 'description of the policy')
    .option('--rules <RULES>', 'rules in HCL or JSON: inline, @FILE, or - to read them from standard input')
    .option('--valid-datacenter <DC>', 'datacenter the policy is valid in (repeatable; all by default)', repeat)
    .action(
      run<PolicyOptions>(async (o, c) => {
        const rules = await rulesFrom(o.rules, ioOf(o));
        print(
          o,
          await c.policies.create({
            Name: need(o.name, 'name'),
            ...(o.description !== undefined ? { Description: o.description } : {}),
            ...(rules !== undefined ? { Rules: rules } : {}),
            ...(o.validDatacenter?.length ? { Datacenters: o.validDatacenter } : {}),
          }),
          formatPolicy,
        );
      }),
    );

  meta(common(policy.command('read').description('read a policy by ID (or a unique prefix of it) or name')))
    .option('--id <ID>', 'ID of the policy, or a unique prefix of it')
    .option('--name <NAME>', 'name of the policy')
    .option('--valid-datacenter <DC>', '(ignored)', repeat)
    .action(run<PolicyOptions>(async (o, c) => print(o, await byIdOrName(o, c), formatPolicy)));

  meta(common(policy.command('update').description('update a policy: what is not given is kept (all replaced with -no-merge)')))
    .option('--id <ID>', 'ID of the policy or a unique prefix of it (or select it with -name)')
    .option('--name <NAME>', 'with -id: the new name; without: the policy to update')
    .option('--description <TEXT>', 'new description')
    .option('--rules <RULES>', 'new rules: inline, @FILE, or - to read them from standard input')
    .option('--valid-datacenter <DC>', 'datacenters the policy is valid in (repeatable)', repeat)
    .option('--no-merge', 'replace every field instead of keeping what is not given')
    .action(
      run<PolicyOptions>(async (o, c) => {
        const current = await byIdOrName(o, c);
        const merge = o.merge !== false;
        const rules = await rulesFrom(o.rules, ioOf(o));
        const dcs = o.validDatacenter?.length ? o.validDatacenter : merge ? current.Datacenters : undefined;
        print(
          o,
          await c.policies.update(current.ID, {
            Name: o.id && o.name ? o.name : current.Name,
            Description: o.description ?? (merge ? current.Description : ''),
            Rules: rules ?? (merge ? current.Rules : ''),
            ...(dcs ? { Datacenters: dcs } : {}),
          }),
          formatPolicy,
        );
      }),
    );

  common(policy.command('delete').description('delete a policy by ID (or a unique prefix of it) or name'))
    .option('--id <ID>', 'ID of the policy, or a unique prefix of it')
    .option('--name <NAME>', 'name of the policy')
    .option('--valid-datacenter <DC>', '(ignored)', repeat)
    .action(
      run<PolicyOptions>(async (o, c) => {
        const id = o.id ? await policyID(c, o.id) : (await byIdOrName(o, c)).ID;
        const deleted = await c.policies.delete(id);
        print(o, deleted, (d) => (d ? `Policy "${id}" deleted successfully` : `Policy "${id}" not found; nothing deleted`));
      }),
    );

  common(policy.command('list').description('list policies')).action(
    run<CommonOptions>(async (o, c) => print(o, (await c.policies.list()).value, formatPolicyList)),
  );
}

function templatedPolicyCommands(acl: Command): void {
  const tp = acl.command('templated-policy').description('list, read and preview the built-in templated policies');
  common(tp.command('list').description('list the templated policies')).action(
    run<CommonOptions>(async (o, c) => print(o, await c.templatedPolicies.list(), formatTemplateList)),
  );
  common(tp.command('read').description('read a templated policy'))
    .option('--name <NAME>', 'name, e.g. builtin/service')
    .action(
      run<CommonOptions & { name?: string }>(async (o, c) =>
        print(o, await c.templatedPolicies.read(need(o.name, 'name')), formatTemplate),
      ),
    );
  common(tp.command('preview').description('render a templated policy with its variables'))
    .option('--name <NAME>', 'name, e.g. builtin/service')
    .option('--var <name:VALUE>', 'a variable, e.g. name:web (repeatable)', repeat)
    .action(
      run<CommonOptions & { name?: string; var?: string[] }>(async (o, c) => {
        print(o, await c.templatedPolicies.preview(need(o.name, 'name'), templateVariables(o.var ?? [])), formatPolicy);
      }),
    );
}

/** `watchword acl ...`, shaped like `consul acl ...`. */
export function aclCommand(program: Command): void {
  const acl = program.command('acl').description('manage ACL tokens, roles and policies (like `consul acl`)');
  common(acl.command('bootstrap').description('create the first management token (once per cluster)')).action(
    run<CommonOptions>(async (o, c) => print(o, await c.bootstrap(), formatToken)),
  );
  tokenCommands(acl);
  roleCommands(acl);
  policyCommands(acl);
  templatedPolicyCommands(acl);
  authCommands(acl);
  authorizeCommand(acl);
  common(acl.command('replication').description('show the replication status of a datacenter')).action(
    run<CommonOptions>(async (o, c) => print(o, await c.replication(), formatReplication)),
  );
}

interface AuthorizeOptions extends CommonOptions {
  resource: string;
  segment?: string;
  access: string;
}

/**
 * `watchword acl authorize`: may the token (-token, else WATCHWORD_HTTP_TOKEN) do this?
 * Prints allow or deny and exits 0 or 2, so scripts can test with it (README, "Enforcing policies in your service").
 */
function authorizeCommand(acl: Command): void {
  common(acl.command('authorize').description('ask whether a token may do something: prints allow (exit 0) or deny (exit 2)'))
    .requiredOption(
      '--resource <RESOURCE>',
      'acl, operator, keyring, mesh, peering, agent, event, node, query, session, service, key or intention',
    )
    .option('--segment <NAME>', 'the name the rule is about (service name, key, node, …); required for segmented resources')
    .requiredOption('--access <ACCESS>', 'read, write, or list (key)')
    .action(
      run<AuthorizeOptions>(async (o, c) => {
        const [answer] = await c.acl.authorize([
          { Resource: o.resource, ...(o.segment !== undefined ? { Segment: o.segment } : {}), Access: o.access },
        ]);
        if (o.format === 'json') print(o, answer, () => '');
        else ioOf(o).out(`${answer?.Allow ? 'allow' : 'deny'}\n`);
        if (!answer?.Allow) ioOf(o).setExitCode(2);
      }),
    );
}
