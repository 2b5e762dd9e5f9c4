/**
 * Every audit event type (docs/audit.md: Audit log), declared once: the emitters take
 * `AuditType` (a type not listed here does not compile), the audit endpoint refuses a `type`
 * filter not listed here, the web UI's Audit page loads the list from `/ui/audit-types.js`,
 * and docs/audit.md's table is this table (`test/observability/audit-types.test.ts` compares them).
 */

/** The kinds of ACL object an audit line names, as it names them. */
export const AUDIT_OBJECT_KINDS = ['token', 'policy', 'role', 'auth-method', 'binding-rule', 'quota'] as const;
export type AuditObjectKind = (typeof AUDIT_OBJECT_KINDS)[number];

/** The event types in docs/audit.md's table, a row per group: when each is written, and what it adds. */
export const AUDIT_EVENT_GROUPS = [
  {
    types: [
      'token-create',
      'token-update',
      'token-rotate',
      'token-clone',
      'token-delete',
      'policy-create',
      'policy-update',
      'policy-delete',
      'role-create',
      'role-update',
      'role-delete',
      'auth-method-create',
      'auth-method-update',
      'auth-method-delete',
      'binding-rule-create',
      'binding-rule-update',
      'binding-rule-delete',
      'quota-create',
      'quota-update',
      'quota-delete',
    ],
    when: 'every ACL write',
    also:
      "`Index`, `Objects` (each `Kind`, `ID`, `Namespace`, `Partition`, new `Hash`, or `Deleted`; an auth method's delete names " +
      'the rules and tokens it took along)',
  },
  {
    types: ['bootstrap', 'bootstrap-reset'],
    when: 'a bootstrap (`initial_management_token` at start-up too), one through the reset file',
    also: "the management token's accessor in `Objects`",
  },
  { types: ['snapshot-save', 'snapshot-restore'], when: '`GET` / `PUT /v1/snapshot`', also: '`Counts` of each kind' },
  {
    types: ['login', 'logout'],
    when: '`POST /v1/acl/login`, `/logout`',
    also: '`AuthMethod`, the `BindingRules` that matched, the token in `Objects`',
  },
  { types: ['reap'], when: 'the reaper deleted expired tokens', also: 'them in `Objects` (`AccessorID` is `reaper`)' },
  {
    types: ['refused'],
    when: 'every 403 and 429 (a watch entry naming a secret no token holds too); past a burst, counted (below)',
    also: '`Code`, `Reason` (the permission lacked); on a line that counts refusals, `Count`, `First`, `Last`',
  },
  {
    types: ['denied-by-client'],
    when:
      "an enforcing client reported denials it made (at most once a second, over its watch); its `AccessorID` is the watch's own " +
      'token; past a burst, counted (below)',
    also:
      '`Client` (the name it gives), `Denials` (each `AccessorID`, `Resource`, `Segment` (cut to 256 characters), `Access`, ' +
      '`Namespace`, `Partition`, `Count`; the 100 most frequent), `Count`, `NotListed`, `UnknownSecrets` (denied with no token to ' +
      'name), `Dropped` (not reported)',
  },
  { types: ['reload'], when: 'SIGHUP', also: '`Changed`, `TLSReloaded`, `NeedRestart`' },
  {
    types: ['leadership', 'replication-connect', 'replication-disconnect'],
    when: 'a server leads or follows; a secondary connects to or leaves the primary',
    also: '`Role`, `Term`; `Secondary` or `Primary`',
  },
  {
    types: ['leader-transferred'],
    when: "an operator handed the datacenter's leadership to another server (`watchword operator raft transfer-leader`)",
    also: '`From`, `To`, `Term` (the new one), `By` (the AccessorID that asked)',
  },
  {
    types: ['stale-primary'],
    when: 'a replication stream refused because its primary is of a lower epoch than one already seen (at both ends)',
    also: "`Epoch` (the stale primary's), `Seen` (the highest seen); `Secondary` or `Primary`",
  },
  {
    types: ['primary-promoted', 'primary-followed', 'rolled-back'],
    when:
      'this datacenter was promoted to primary; it follows a primary of a newer epoch; a catch-up from a new primary replaced ' +
      'or removed global objects held here',
    also:
      '`Epoch`, `PreviousPrimary`, `LastIndex`, `LastContact`, `Forced`, `Warning`; `Primary`, `Epoch`, `Previous`; ' +
      '`Objects` (each `Kind`, `ID`, `Deleted` or the `Hash` rolled back), `Count`',
  },
  {
    types: ['upgrade-finalized'],
    when: 'the upgrade was finalized at the primary (`watchword operator upgrade finalize`, or upgrade_auto_finalize)',
    also: '`Level` (the release and protocol versions every server reached)',
  },
] as const;

export type AuditType = (typeof AUDIT_EVENT_GROUPS)[number]['types'][number];

/** Every type, in the table's order. */
export const AUDIT_TYPES: readonly AuditType[] = AUDIT_EVENT_GROUPS.flatMap((g) => g.types);

const KNOWN = new Set<string>(AUDIT_TYPES);

export function isAuditType(type: string): type is AuditType {
  return KNOWN.has(type);
}

export function isAuditKind(kind: string): kind is AuditObjectKind {
  return (AUDIT_OBJECT_KINDS as readonly string[]).includes(kind);
}

/** docs/audit.md's table of event types, as Markdown. */
export function auditTypesTable(): string {
  const rows = AUDIT_EVENT_GROUPS.map((g) => `| ${g.types.map((t) => `\`${t}\``).join(', ')} | ${g.when} | ${g.also} |`);
  return ['| Type | when | also |', '|---|---|---|', ...rows].join('\n');
}
