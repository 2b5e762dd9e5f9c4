import {
  type DryRunResponse,
  type PolicyResponse,
  type ReplicationStatusResponse,
  type RoleResponse,
  type SyntheticPolicyResponse,
  type TemplatedPolicyResponse,
  type TokenResponse,
  type WhoCanResponse,
  reasonText,
} from '../client/index.js';

/**
 * Human output, shaped like Consul's CLI: aligned key/value blocks for one object,
 * tables for lists. `-format json` bypasses all of it and prints the API's JSON.
 */

export type Row = [string, string | undefined];

export { metaRows };

export function block(rows: Row[], sections: Array<[string, string[]]> = []): string {
  const present = rows.filter((r): r is [string, string] => r[1] !== undefined);
  const width = Math.max(...present.map(([k]) => k.length)) + 2;
  const lines = present.map(([k, v]) => `${`${k}:`.padEnd(width)}${v}`);
  for (const [title, items] of sections) {
    if (items.length === 0) continue;
    lines.push(`${title}:`);
    for (const item of items) lines.push(`   ${item}`);
  }
  return lines.join('\n');
}

export function table(headers: string[], rows: string[][]): string {
  if (rows.length === 0) return '(none)';
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] as number)))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

const links = (list: Array<{ ID: string; Name: string }> | undefined) => (list ?? []).map((l) => `${l.ID} - ${l.Name}`);

const serviceIdentities = (t: Pick<TokenResponse, 'ServiceIdentities'>) =>
  (t.ServiceIdentities ?? []).map((s) => `${s.ServiceName} (Datacenters: ${s.Datacenters?.join(', ') || 'all'})`);

const nodeIdentities = (t: Pick<TokenResponse, 'NodeIdentities'>) =>
  (t.NodeIdentities ?? []).map((n) => `${n.NodeName} (Datacenter: ${n.Datacenter})`);

const templated = (t: Pick<TokenResponse, 'TemplatedPolicies'>) =>
  (t.TemplatedPolicies ?? []).map(
    (p) =>
      p.TemplateName +
      (p.TemplateVariables ? ` (Name: ${p.TemplateVariables.name})` : '') +
      (p.Datacenters ? ` (Datacenters: ${p.Datacenters.join(', ')})` : ''),
  );

/** Hash and indices, shown with -meta (as Consul's -meta): the same three rows for every object that has them. */
function metaRows(o: { Hash?: string; CreateIndex?: number; ModifyIndex?: number }, meta: boolean): Row[] {
  if (!meta) return [];
  return [
    ['Hash', o.Hash],
    ['Create Index', o.CreateIndex === undefined ? undefined : String(o.CreateIndex)],
    ['Modify Index', o.ModifyIndex === undefined ? undefined : String(o.ModifyIndex)],
  ];
}

/** A token as `consul acl token read` prints it; with `meta`, its Hash and indices too. */
export function formatToken(t: TokenResponse, meta = false): string {
  return block(
    [
      ['AccessorID', t.AccessorID],
      ['SecretID', t.SecretID],
      ['Partition', t.Partition],
      ['Namespace', t.Namespace],
      ['Description', t.Description],
      ['Local', String(t.Local)],
      ['Auth Method', t.AuthMethod],
      ['Create Time', t.CreateTime],
      ['Expiration Time', t.ExpirationTime],
      ['Old Secret Until', t.PreviousSecretExpirationTime],
      ['Last Used Time', t.LastUsedTime],
      ...metaRows(t, meta),
    ],
    [
      ['Policies', links(t.Policies)],
      ['Roles', links(t.Roles)],
      ['Service Identities', serviceIdentities(t)],
      ['Node Identities', nodeIdentities(t)],
      ['Templated Policies', templated(t)],
    ],
  );
}

export function formatTokenList(tokens: TokenResponse[]): string {
  return table(
    ['AccessorID', 'Description', 'Local', 'Policies', 'Roles', 'Expires', 'Last used'],
    tokens.map((t) => [
      t.AccessorID,
      t.Description,
      String(t.Local),
      (t.Policies ?? []).map((p) => p.Name).join(',') || '-',
      (t.Roles ?? []).map((r) => r.Name).join(',') || '-',
      t.ExpirationTime ?? 'never',
      t.LastUsedTime ?? '-',
    ]),
  );
}

/** A policy as `consul acl policy read` prints it; with `meta`, its Hash and indices too. */
export function formatPolicy(p: PolicyResponse | SyntheticPolicyResponse, meta = false): string {
  const stored = 'Namespace' in p;
  const rows: Row[] = [
    ['ID', p.ID],
    ['Name', p.Name],
    ['Partition', stored ? p.Partition : undefined],
    ['Namespace', stored ? p.Namespace : undefined],
    ['Description', p.Description],
    ['Datacenters', p.Datacenters?.join(', ') ?? ''],
    ...(stored ? metaRows(p, meta) : []),
  ];
  return `${block(rows)}\nRules:\n${p.Rules ?? ''}`;
}

export function formatPolicyList(policies: PolicyResponse[]): string {
  return table(
    ['ID', 'Name', 'Description', 'Datacenters'],
    policies.map((p) => [p.ID, p.Name, p.Description, p.Datacenters?.join(',') || 'all']),
  );
}

/** A role as `consul acl role read` prints it; with `meta`, its Hash and indices too. */
export function formatRole(r: RoleResponse, meta = false): string {
  return block(
    [
      ['ID', r.ID],
      ['Name', r.Name],
      ['Partition', r.Partition],
      ['Namespace', r.Namespace],
      ['Description', r.Description],
      ...metaRows(r, meta),
    ],
    [
      ['Policies', links(r.Policies)],
      ['Service Identities', serviceIdentities(r)],
      ['Node Identities', nodeIdentities(r)],
      ['Templated Policies', templated(r)],
    ],
  );
}

export function formatRoleList(roles: RoleResponse[]): string {
  return table(
    ['ID', 'Name', 'Description', 'Policies'],
    roles.map((r) => [r.ID, r.Name, r.Description, (r.Policies ?? []).map((p) => p.Name).join(',') || '-']),
  );
}

export function formatTemplate(t: TemplatedPolicyResponse): string {
  return `${block([
    ['Name', t.TemplateName],
    ['Description', t.Description],
    ['Input variables', t.Schema ? 'Name (required)' : 'none'],
  ])}\nTemplate:\n${t.Template}`;
}

export function formatTemplateList(list: Record<string, TemplatedPolicyResponse>): string {
  return table(
    ['Name', 'Variables', 'Description'],
    Object.values(list).map((t) => [t.TemplateName, t.Schema ? 'Name' : '-', t.Description]),
  );
}

/** Consul's zero time (the status's "never") as a person reads it. */
const shownTime = (t: string): string => (t.startsWith('0001-01-01') ? 'never' : t);

export function formatReplication(s: ReplicationStatusResponse): string {
  return block(
    [
      ['Enabled', String(s.Enabled)],
      ['Running', String(s.Running)],
      ['Connected', String(s.Connected)],
      ['Source Datacenter', s.SourceDatacenter],
      ['Replication Type', s.ReplicationType],
      ['Replicated Index', String(s.ReplicatedIndex)],
      ['Primary Index', String(s.PrimaryIndex)],
      ['Lag (entries)', String(s.LagEntries)],
      ['Last Contact (ms)', String(s.LastContactMs)],
      ['Last Success', shownTime(s.LastSuccess)],
      ['Last Error', shownTime(s.LastError)],
      ['Last Error Message', s.LastErrorMessage || undefined],
    ],
    [['Secondaries', (s.Secondaries ?? []).map((x) => `${x.Datacenter} at ${x.Address} (acked ${x.AckedIndex}, lag ${x.LagEntries})`)]],
  );
}

/** A dry run's answer: how many tokens the change reaches, then each check that would flip. */
export function formatDryRun(d: DryRunResponse): string {
  const head = `Tokens reached: ${d.Tokens} (${d.TokensWithChecks} with checks asked in the last hour, ${d.Checks} checks judged again)`;
  if (d.Flips.length === 0) return `${head}\nNo check would change its answer.`;
  const rows = d.Flips.map((f) => [
    `${f.Resource}${f.Segment !== undefined ? ` ${JSON.stringify(f.Segment)}` : ''} ${f.Access}`,
    `${f.From ? 'allow' : 'deny'} -> ${f.To ? 'allow' : 'deny'}`,
    String(f.Tokens),
    f.Example,
  ]);
  return `${head}\n${table(['Check', 'Answer', 'Tokens', 'Example'], rows)}`;
}

/** Who can: the roles, then the tokens, each with the rule that grants it. */
export function formatWhoCan(w: Omit<WhoCanResponse, 'Scanned'>): string {
  const check = `${w.Resource}${w.Segment !== undefined ? ` ${JSON.stringify(w.Segment)}` : ''} ${w.Access}`;
  const lines = [`Who can ${check} in ${w.Partition}/${w.Namespace}:`];
  if (w.Roles?.length) {
    lines.push('Roles:');
    for (const r of w.Roles) lines.push(`   ${r.ID} - ${r.Name}: ${reasonText(r.Reason)}`);
  }
  lines.push('Tokens:');
  if (w.Tokens.length === 0) lines.push('   (none)');
  for (const t of w.Tokens) lines.push(`   ${t.AccessorID}${t.Description ? ` "${t.Description}"` : ''}: ${reasonText(t.Reason)}`);
  if (w.NextCursor !== undefined) lines.push(`(more: -limit was reached)`);
  return lines.join('\n');
}
