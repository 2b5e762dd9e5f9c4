import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import type { AuthMethodInput, AuthMethodResponse, BindingRuleInput, BindingRuleResponse } from '../client/index.js';
import { type CommonOptions, UsageError, common, meta, print, run } from './common.js';
import { bindingRuleID } from './ids.js';
import { writeSecretFile } from './io.js';
import { block, formatToken, metaRows, table } from './output.js';

/** `@file` reads a file; anything else is the value itself (as Consul's CLI). */
function valueOrFile(v: string, flag: string): string {
  if (!v.startsWith('@')) return v;
  try {
    return readFileSync(v.slice(1), 'utf8');
  } catch (err) {
    throw new UsageError(`-${flag} ${v}: ${(err as Error).message}`);
  }
}

function need(value: string | undefined, flag: string): string {
  if (!value) throw new UsageError(`missing required flag -${flag}`);
  return value;
}

/** An auth method as `consul acl auth-method read` prints it; with `meta`, its indices too. */
export function formatAuthMethod(m: AuthMethodResponse, meta = false): string {
  return block([
    ['Name', m.Name],
    ['Type', m.Type],
    ['Partition', m.Partition],
    ['Namespace', m.Namespace],
    ['DisplayName', m.DisplayName ?? ''],
    ['Description', m.Description ?? ''],
    ['MaxTokenTTL', m.MaxTokenTTL ?? '0s'],
    ['TokenLocality', m.TokenLocality || 'local'],
    ...metaRows(m, meta),
    ['Config', m.Config ? `\n${JSON.stringify(m.Config, null, 2)}` : undefined],
  ]);
}

/** A binding rule as `consul acl binding-rule read` prints it; with `meta`, its indices too. */
export function formatBindingRule(r: BindingRuleResponse, meta = false): string {
  return block([
    ['ID', r.ID],
    ['AuthMethod', r.AuthMethod],
    ['Description', r.Description],
    ['BindType', r.BindType],
    ['BindName', r.BindName],
    ['BindVars', r.BindVars?.name !== undefined ? `Name=${r.BindVars.name}` : undefined],
    ['Selector', r.Selector],
    ...metaRows(r, meta),
  ]);
}

interface MethodOptions extends CommonOptions {
  name?: string;
  type?: string;
  displayName?: string;
  description?: string;
  maxTokenTtl?: string;
  tokenLocality?: string;
  config?: string;
  kubernetesHost?: string;
  kubernetesCaCert?: string;
  kubernetesServiceAccountJwt?: string;
  merge?: boolean;
}

function methodFlags(cmd: Command): Command {
  return cmd
    .option('--name <NAME>', 'name of the auth method')
    .option('--display-name <TEXT>', 'name shown in user interfaces')
    .option('--description <TEXT>', 'description')
    .option('--max-token-ttl <DURATION>', 'lifetime of tokens made by login, e.g. 1h (0: no expiry)')
    .option('--token-locality <local|global>', 'local: login tokens stay in the datacenter that made them; global: they replicate')
    .option('--config <JSON|@FILE>', 'the Config object as JSON, or @file.json')
    .option('--kubernetes-host <URL>', 'kubernetes: address of the API server')
    .option('--kubernetes-ca-cert <PEM|@FILE>', 'kubernetes: CA certificate of the API server')
    .option('--kubernetes-service-account-jwt <JWT|@FILE>', 'kubernetes: a service account JWT allowed to create TokenReviews');
}

function methodConfig(o: MethodOptions): Record<string, unknown> | undefined {
  let config: Record<string, unknown> | undefined;
  if (o.config !== undefined) {
    try {
      config = JSON.parse(valueOrFile(o.config, 'config')) as Record<string, unknown>;
    } catch (err) {
      if (err instanceof UsageError) throw err;
      throw new UsageError(`-config: not a JSON object: ${(err as Error).message}`);
    }
  }
  if (o.kubernetesHost || o.kubernetesCaCert || o.kubernetesServiceAccountJwt) {
    config = {
      ...config,
      ...(o.kubernetesHost ? { Host: o.kubernetesHost } : {}),
      ...(o.kubernetesCaCert ? { CACert: valueOrFile(o.kubernetesCaCert, 'kubernetes-ca-cert') } : {}),
      ...(o.kubernetesServiceAccountJwt
        ? { ServiceAccountJWT: valueOrFile(o.kubernetesServiceAccountJwt, 'kubernetes-service-account-jwt').trim() }
        : {}),
    };
  }
  return config;
}

function methodFields(o: MethodOptions): AuthMethodInput {
  const config = methodConfig(o);
  return {
    ...(o.displayName !== undefined ? { DisplayName: o.displayName } : {}),
    ...(o.description !== undefined ? { Description: o.description } : {}),
    ...(o.maxTokenTtl !== undefined ? { MaxTokenTTL: o.maxTokenTtl } : {}),
    ...(o.tokenLocality !== undefined ? { TokenLocality: o.tokenLocality } : {}),
    ...(config ? { Config: config } : {}),
  };
}

interface RuleOptions extends CommonOptions {
  id?: string;
  method?: string;
  description?: string;
  selector?: string;
  bindType?: string;
  bindName?: string;
  bindVars?: string;
  merge?: boolean;
}

function ruleFlags(cmd: Command): Command {
  return cmd
    .option('--description <TEXT>', 'description')
    .option('--selector <EXPR>', 'which identities the rule applies to, e.g. \'value.team == "payments"\'')
    .option('--bind-type <TYPE>', 'service, node, role, policy or templated-policy')
    .option('--bind-name <NAME>', 'what to bind; ${value.x} is replaced from the identity')
    .option('--bind-vars <Name=VALUE>', 'variables of a templated policy');
}

function ruleFields(o: RuleOptions): BindingRuleInput {
  let bindVars: { name: string } | undefined;
  if (o.bindVars !== undefined) {
    const m = /^Name=(.*)$/i.exec(o.bindVars);
    if (!m) throw new UsageError(`-bind-vars ${JSON.stringify(o.bindVars)}: expected Name=VALUE`);
    bindVars = { name: m[1] as string };
  }
  return {
    ...(o.description !== undefined ? { Description: o.description } : {}),
    ...(o.selector !== undefined ? { Selector: o.selector } : {}),
    ...(o.bindType !== undefined ? { BindType: o.bindType } : {}),
    ...(o.bindName !== undefined ? { BindName: o.bindName } : {}),
    ...(bindVars ? { BindVars: bindVars } : {}),
  };
}

/** `watchword acl auth-method …` and `watchword acl binding-rule …`, shaped like Consul's. */
export function authCommands(acl: Command): void {
  authMethodCommands(acl);
  bindingRuleCommands(acl);
}

/** `acl auth-method create|read|update|delete|list`. */
function authMethodCommands(acl: Command): void {
  const method = acl.command('auth-method').description('create, read, update, delete and list auth methods');
  methodFlags(meta(common(method.command('create').description('create an auth method'))))
    .option('--type <TYPE>', 'jwt or kubernetes')
    .action(
      run<MethodOptions>(async (o, c) =>
        print(
          o,
          await c.authMethods.create({ Name: need(o.name, 'name'), Type: need(o.type, 'type'), ...methodFields(o) }),
          formatAuthMethod,
        ),
      ),
    );
  meta(common(method.command('read').description('read an auth method')))
    .option('--name <NAME>', 'name of the auth method')
    .action(run<MethodOptions>(async (o, c) => print(o, (await c.authMethods.read(need(o.name, 'name'))).value, formatAuthMethod)));
  methodFlags(meta(common(method.command('update').description('update an auth method: what you do not give is kept unless -no-merge'))))
    .option('--no-merge', 'replace the whole method with what is given')
    .action(
      run<MethodOptions>(async (o, c) => {
        const name = need(o.name, 'name');
        const current = (await c.authMethods.read(name)).value;
        const given = methodFields(o);
        const base: AuthMethodInput =
          o.merge === false
            ? { Type: current.Type }
            : {
                Type: current.Type,
                DisplayName: current.DisplayName,
                Description: current.Description,
                MaxTokenTTL: current.MaxTokenTTL,
                TokenLocality: current.TokenLocality,
                Config: current.Config,
              };
        print(o, await c.authMethods.update(name, { ...base, ...given, Name: name }), formatAuthMethod);
      }),
    );
  common(method.command('delete').description('delete an auth method, its binding rules and the tokens it issued'))
    .option('--name <NAME>', 'name of the auth method')
    .action(
      run<MethodOptions>(async (o, c) => {
        const name = need(o.name, 'name');
        const deleted = await c.authMethods.delete(name);
        print(o, deleted, (d) => (d ? `Auth method "${name}" deleted successfully` : `Auth method "${name}" not found; nothing deleted`));
      }),
    );
  common(method.command('list').description('list auth methods')).action(
    run<CommonOptions>(async (o, c) =>
      print(o, (await c.authMethods.list()).value, (list) =>
        table(
          ['Name', 'Type', 'DisplayName', 'TokenLocality', 'MaxTokenTTL'],
          list.map((m) => [m.Name, m.Type, m.DisplayName ?? '', m.TokenLocality || 'local', m.MaxTokenTTL ?? '0s']),
        ),
      ),
    ),
  );
}

/** `acl binding-rule create|read|update|delete|list`. */
function bindingRuleCommands(acl: Command): void {
  const rule = acl.command('binding-rule').description('create, read, update, delete and list binding rules');
  ruleFlags(meta(common(rule.command('create').description('create a binding rule'))))
    .option('--method <NAME>', 'the auth method the rule belongs to')
    .action(
      run<RuleOptions>(async (o, c) => {
        need(o.bindType, 'bind-type');
        need(o.bindName, 'bind-name');
        print(o, await c.bindingRules.create({ AuthMethod: need(o.method, 'method'), ...ruleFields(o) }), formatBindingRule);
      }),
    );
  meta(common(rule.command('read').description('read a binding rule by ID (or a unique prefix of it)')))
    .option('--id <ID>', 'ID of the rule, or a unique prefix of it')
    .action(
      run<RuleOptions>(async (o, c) =>
        print(o, (await c.bindingRules.read(await bindingRuleID(c, need(o.id, 'id')))).value, formatBindingRule),
      ),
    );
  ruleFlags(meta(common(rule.command('update').description('update a binding rule: what you do not give is kept unless -no-merge'))))
    .option('--id <ID>', 'ID of the rule, or a unique prefix of it')
    .option('--no-merge', 'replace the whole rule with what is given')
    .action(
      run<RuleOptions>(async (o, c) => {
        const id = await bindingRuleID(c, need(o.id, 'id'));
        const current = (await c.bindingRules.read(id)).value;
        const base: BindingRuleInput =
          o.merge === false
            ? {}
            : {
                Description: current.Description,
                Selector: current.Selector,
                BindType: current.BindType,
                BindName: current.BindName,
                ...(current.BindVars ? { BindVars: current.BindVars } : {}),
              };
        print(o, await c.bindingRules.update(id, { ...base, ...ruleFields(o), AuthMethod: current.AuthMethod }), formatBindingRule);
      }),
    );
  common(rule.command('delete').description('delete a binding rule'))
    .option('--id <ID>', 'ID of the rule, or a unique prefix of it')
    .action(
      run<RuleOptions>(async (o, c) => {
        const id = await bindingRuleID(c, need(o.id, 'id'));
        const deleted = await c.bindingRules.delete(id);
        print(o, deleted, (d) => (d ? `Binding rule "${id}" deleted successfully` : `Binding rule "${id}" not found; nothing deleted`));
      }),
    );
  common(rule.command('list').description('list binding rules'))
    .option('--method <NAME>', 'only the rules of this auth method')
    .action(
      run<RuleOptions>(async (o, c) =>
        print(o, (await c.bindingRules.list(o.method ? { authMethod: o.method } : {})).value, (list) =>
          table(
            ['ID', 'AuthMethod', 'BindType', 'BindName', 'Selector'],
            list.map((r) => [r.ID, r.AuthMethod, r.BindType, r.BindName, r.Selector]),
          ),
        ),
      ),
    );
}

interface LoginOptions extends CommonOptions {
  method?: string;
  bearerTokenFile?: string;
  tokenSinkFile?: string;
  meta?: string[];
}

/** `watchword login` and `watchword logout`, as `consul login` / `consul logout`. */
export function loginCommands(program: Command): void {
  common(program.command('login').description('exchange a bearer token from an auth method for a token'))
    .option('--method <NAME>', 'the auth method to log in with')
    .option('--bearer-token-file <FILE>', 'file holding the bearer token (a JWT, or a kubernetes service account token)')
    .option('--token-sink-file <FILE>', 'write the new secret to this file (mode 0600) instead of printing the token')
    .option('--meta <key=value>', 'metadata stored in the token description (repeatable)', (v: string, prev: string[] | undefined) => [
      ...(prev ?? []),
      v,
    ])
    .action(
      run<LoginOptions>(async (o, c) => {
        const file = need(o.bearerTokenFile, 'bearer-token-file');
        let bearer: string;
        try {
          bearer = readFileSync(file, 'utf8').trim();
        } catch (err) {
          throw new UsageError(`-bearer-token-file ${file}: ${(err as Error).message}`);
        }
        const meta: Record<string, string> = {};
        for (const m of o.meta ?? []) {
          const eq = m.indexOf('=');
          if (eq <= 0) throw new UsageError(`-meta ${JSON.stringify(m)}: expected key=value`);
          meta[m.slice(0, eq)] = m.slice(eq + 1);
        }
        const token = await c.login(
          { AuthMethod: need(o.method, 'method'), BearerToken: bearer, ...(Object.keys(meta).length > 0 ? { Meta: meta } : {}) },
          { token: '' },
        );
        if (o.tokenSinkFile) {
          await writeSecretFile(o.tokenSinkFile, token.SecretID);
          return;
        }
        print(o, token, formatToken);
      }),
    );
  common(
    program.command('logout').description('delete the token given with -token (or WATCHWORD_HTTP_TOKEN), which a login must have created'),
  ).action(
    run<CommonOptions>(async (o, c) => {
      await c.logout();
      print(o, true, () => 'Logged out: the token was deleted');
    }),
  );
}
