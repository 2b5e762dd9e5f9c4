import type { Command } from 'commander';
import type { QuotaInput, QuotaResponse } from '../client/index.js';
import { type CommonOptions, UsageError, common, meta, print, run } from './common.js';
import { quotaID } from './ids.js';
import { block, metaRows, table } from './output.js';

/** The scope a quota names, as the CLI shows it. */
const scopeText = (q: QuotaResponse): string =>
  q.AuthMethod ? `auth method ${q.AuthMethod}` : q.Namespace ? `namespace ${q.Namespace}` : `partition ${q.Partition ?? ''}`;

/** A quota with its use; with `meta`, its indices too. */
export function formatQuota(q: QuotaResponse, meta = false): string {
  return block([
    ['ID', q.ID],
    ['Name', q.Name],
    ['Description', q.Description ?? ''],
    ['Scope', scopeText(q)],
    ['Used', q.MaxTokens === undefined ? String(q.Used) : `${q.Used} of ${q.MaxTokens}`],
    ['MaxTokenTTL', q.MaxTokenTTL ?? 'none'],
    ['MinTokenTTL', q.MinTokenTTL ?? 'none'],
    ['Local', String(q.Local)],
    ...metaRows(q, meta),
  ]);
}

interface QuotaOptions extends CommonOptions {
  id?: string;
  name?: string;
  description?: string;
  authMethod?: string;
  maxTokens?: string;
  maxTokenTtl?: string;
  minTokenTtl?: string;
  local?: boolean;
  merge?: boolean;
}

function quotaFlags(cmd: Command): Command {
  return cmd
    .option('--name <NAME>', 'name of the quota')
    .option('--description <TEXT>', 'description')
    .option('--auth-method <NAME>', 'scope: the tokens this auth method’s logins made')
    .option('--max-tokens <N>', 'the most live tokens the scope may hold (empty: no limit)')
    .option('--max-token-ttl <DURATION>', 'the longest a token made there may live, e.g. 24h (0: no limit)')
    .option('--min-token-ttl <DURATION>', 'the shortest expiry a token made there may be given (0: no limit)');
}

function quotaFields(o: QuotaOptions): QuotaInput {
  let max: number | undefined;
  if (o.maxTokens !== undefined && o.maxTokens !== '') {
    max = Number(o.maxTokens);
    if (!Number.isInteger(max) || max < 0) throw new UsageError(`-max-tokens ${o.maxTokens}: not a whole number`);
  }
  const scopes = [o.authMethod, o.namespace, o.partition].filter((v) => v !== undefined);
  return {
    ...(o.name !== undefined ? { Name: o.name } : {}),
    ...(o.description !== undefined ? { Description: o.description } : {}),
    ...(scopes.length > 0 ? { AuthMethod: o.authMethod ?? '', Namespace: o.namespace ?? '', Partition: o.partition ?? '' } : {}),
    ...(max !== undefined ? { MaxTokens: max } : {}),
    ...(o.maxTokenTtl !== undefined ? { MaxTokenTTL: o.maxTokenTtl } : {}),
    ...(o.minTokenTtl !== undefined ? { MinTokenTTL: o.minTokenTtl } : {}),
  };
}

/**
 * `acl quota create|read|update|delete|list` (docs/http-api.md, "Quotas"). A quota's scope is
 * `-auth-method`, or the common `-namespace` or `-partition` (quotas are the cluster's, so those
 * name what the quota counts, not where the request acts).
 */
export function quotaCommands(acl: Command): void {
  const quota = acl.command('quota').description('create, read, update, delete and list quotas on tokens');
  quotaFlags(
    meta(
      common(
        quota.command('create').description('create a quota: -name, one scope (-auth-method, -namespace or -partition), and its limits'),
      ),
    ),
  )
    .option('--local', 'this datacenter only, counting its Local tokens')
    .action(
      run<QuotaOptions>(async (o, c) => {
        if (!o.name) throw new UsageError('missing required flag -name');
        print(o, await c.quotas.create({ ...quotaFields(o), ...(o.local ? { Local: true } : {}) }), formatQuota);
      }),
    );
  meta(common(quota.command('read').description('read a quota by ID (or a unique prefix of it) or name, with its use')))
    .option('--id <ID>', 'ID of the quota, a unique prefix of it, or its name')
    .action(run<QuotaOptions>(async (o, c) => print(o, (await c.quotas.read(await quotaID(c, need(o.id)))).value, formatQuota)));
  quotaFlags(meta(common(quota.command('update').description('update a quota: what you do not give is kept unless -no-merge'))))
    .option('--id <ID>', 'ID of the quota, a unique prefix of it, or its name')
    .option('--no-merge', 'replace the whole quota with what is given')
    .action(
      run<QuotaOptions>(async (o, c) => {
        const id = await quotaID(c, need(o.id));
        const current = (await c.quotas.read(id)).value;
        const base: QuotaInput =
          o.merge === false
            ? { Name: current.Name }
            : {
                Name: current.Name,
                Description: current.Description ?? '',
                AuthMethod: current.AuthMethod ?? '',
                Namespace: current.Namespace ?? '',
                Partition: current.Partition ?? '',
                ...(current.MaxTokens !== undefined ? { MaxTokens: current.MaxTokens } : {}),
                ...(current.MaxTokenTTL ? { MaxTokenTTL: current.MaxTokenTTL } : {}),
                ...(current.MinTokenTTL ? { MinTokenTTL: current.MinTokenTTL } : {}),
              };
        // `-max-tokens ""` lifts the limit.
        const { MaxTokens: kept, ...rest } = base;
        const merged = { ...rest, ...(o.maxTokens === '' || kept === undefined ? {} : { MaxTokens: kept }), ...quotaFields(o) };
        print(o, await c.quotas.update(id, { ...merged, Local: current.Local }), formatQuota);
      }),
    );
  common(quota.command('delete').description('delete a quota'))
    .option('--id <ID>', 'ID of the quota, a unique prefix of it, or its name')
    .action(
      run<QuotaOptions>(async (o, c) => {
        const id = await quotaID(c, need(o.id));
        const deleted = await c.quotas.delete(id);
        print(o, deleted, (d) => (d ? `Quota "${id}" deleted successfully` : `Quota "${id}" not found; nothing deleted`));
      }),
    );
  common(quota.command('list').description('list quotas with their use')).action(
    run<QuotaOptions>(async (o, c) =>
      print(o, (await c.quotas.list()).value, (list) =>
        table(
          ['ID', 'Name', 'Scope', 'Used', 'MaxTokens', 'MaxTokenTTL', 'Local'],
          list.map((q) => [
            q.ID,
            q.Name,
            scopeText(q),
            String(q.Used),
            q.MaxTokens === undefined ? '' : String(q.MaxTokens),
            q.MaxTokenTTL ?? '',
            String(q.Local),
          ]),
        ),
      ),
    ),
  );
}

function need(id: string | undefined): string {
  if (!id) throw new UsageError('missing required flag -id');
  return id;
}
