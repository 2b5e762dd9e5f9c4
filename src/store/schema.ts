import type { z } from 'zod';
import { expiryMillis } from '../domain/expiry.js';
import {
  AUTH_METHOD_FIELDS,
  BINDING_RULE_FIELDS,
  type FieldTable,
  POLICY_FIELDS,
  QUOTA_FIELDS,
  ROLE_FIELDS,
  TOKEN_FIELDS,
  laterForms,
} from '../domain/records.js';
import type { AuthMethodRecord, BindingRuleRecord, PolicyRecord, QuotaRecord, RoleRecord, TokenRecord } from '../domain/types.js';
import {
  authMethodRecordSchema,
  bindingRuleRecordSchema,
  policyRecordSchema,
  quotaRecordSchema,
  roleRecordSchema,
  tokenRecordSchema,
} from './records.js';

/**
 * The one declaration of every table: its records' shape, where they live on disk, and
 * the indexes the in-memory state keeps for them. Both the memory tables and the
 * LevelDB layout derive from it, so an index cannot be declared in one place and
 * misspelt in another: index names are typed.
 *
 * On disk only records, metadata and the change log are stored; every index is
 * rebuilt in memory when the store opens.
 *
 *   t <accessor> / p <id> / r <id>   records (msgpack)
 *   am <partition,namespace,name>    auth methods
 *   br <id>                          binding rules
 *   q <id>                           quotas
 *   m <name>                         metadata (format, indexes, bootstrap state, log identity, cursor)
 *   l <index hex>                    change log (primary)
 */

/**
 * Every table, in the order a snapshot applies them (what tokens and rules link to first).
 * The one list: the record types, the change log's changes, the replication frames, the
 * snapshot file and the secondary's diff are all derived from it and from `TABLES` below.
 */
export const TABLE_NAMES = ['policies', 'roles', 'authMethods', 'bindingRules', 'tokens', 'quotas'] as const;

export type TableName = (typeof TABLE_NAMES)[number];

/**
 * The replication version that first carries each table added after the first release (absent:
 * every version does): a secondary speaking less is sent none of its records, neither in a
 * snapshot nor in the log (its frames would refuse a table they do not know).
 */
export const TABLE_SINCE: Partial<Record<TableName, number>> = { quotas: 5 };

/** The highest replication version, up to `version`, that first carried a table (0: none since the first release's). */
export const tablesLevel = (version: number): number =>
  Math.max(0, ...Object.values(TABLE_SINCE).filter((v): v is number => v !== undefined && v <= version));

/** The tables a replication version carries. */
export const tablesSpoken = (version: number): readonly TableName[] => TABLE_NAMES.filter((t) => (TABLE_SINCE[t] ?? 0) <= version);

/** Tables whose changes blocking queries can wait on. */
export type WatchTable = TableName | 'bootstrap';

export interface IndexDef<R> {
  /** Unique indexes map a key to one record; the others to a set of records. */
  unique: boolean;
  /**
   * The record's fields `keys` reads, declared once with the index: a start reads only these of
   * each record (with the ID), so an index on a new field is rebuilt at the next start too.
   */
  reads: readonly string[];
  /** Calls `emit` with each key a record is found under (none: not in this index). */
  keys(record: R, emit: (key: string) => void): void;
}

/** The keys of a record in one index, as a list. */
export function keysOf<R>(idx: IndexDef<R>, record: R): string[] {
  const out: string[] = [];
  idx.keys(record, (k) => out.push(k));
  return out;
}

export interface TableDef<R, I extends string> {
  name: TableName;
  /** Prefix of record keys on disk. */
  prefix: string;
  /** Its records' fields, declared once (domain/records.ts). */
  fields: FieldTable;
  /** Validates a record read back from disk or received from a peer. */
  schema: z.ZodType<R>;
  id(record: R): string;
  /** Whether a change to this record enters the replicated change log. */
  isGlobal(record: R): boolean;
  indexes: Record<I, IndexDef<R>>;
  /** Records kept in time order by this (the expiry index), when the table has one, reading these fields. */
  orderedBy?: { reads: readonly string[]; time(record: R): number | undefined };
}

/** Every field a table's ID, indexes and time order read: all a start reads of each record, the ID first. */
export function indexedFields<R, I extends string>(def: TableDef<R, I>, idField: string): string[] {
  const out = [idField];
  const add = (f: string) => {
    if (!(f in def.fields)) throw new Error(`${def.name}: an index reads ${f}, which its records do not declare`);
    if (!out.includes(f)) out.push(f);
  };
  for (const idx of Object.values<IndexDef<R>>(def.indexes)) idx.reads.forEach(add);
  def.orderedBy?.reads.forEach(add);
  return out;
}

/** NUL joins the parts of composite keys: no name the API accepts contains it. */
export const SEP = '\u0000';
export const key = (...parts: string[]): string => parts.join(SEP);

const scopeKeys = new Map<string, Map<string, string>>();

/** Where an object lives, as an index key (one string per place, not one per record). */
export function scopeKey(partition: string, namespace: string): string {
  let byNamespace = scopeKeys.get(partition);
  if (!byNamespace) {
    if (scopeKeys.size > 10_000) scopeKeys.clear();
    scopeKeys.set(partition, (byNamespace = new Map()));
  }
  let k = byNamespace.get(namespace);
  if (k === undefined) {
    k = key(partition, namespace);
    if (byNamespace.size < 10_000) byNamespace.set(namespace, k);
  }
  return k;
}
/** A name in a scope, as the unique name indexes hold it (names compare case-insensitively). */
export const nameKey = (partition: string, namespace: string, name: string): string => key(partition, namespace, name.toLowerCase());

/**
 * The hour a token was made in, as its `created` index key (`2026-11-27T17`): what a list of
 * tokens unused since a time starts from (docs/http-api.md, "Last use"). Keys compare as the hours do.
 */
export function createdHour(createTime: string): string {
  // The server writes times in UTC ('Z'); a restored record may carry an offset.
  if (createTime.endsWith('Z') && createTime.length >= 13) return createTime.slice(0, 13);
  const ms = Date.parse(createTime);
  return Number.isNaN(ms) ? '' : new Date(ms).toISOString().slice(0, 13);
}

/** What a quota limits (docs/http-api.md, "Quotas"): the tokens of an auth method, a namespace or a partition. */
export type QuotaScopeKind = 'AuthMethod' | 'Namespace' | 'Partition';

/**
 * Keys of a scope: the token table's `quota` index holds each token under its scope's key of its
 * locality (`global` or `local`), so a Local quota counts the `local` key's members and a global
 * one both keys'; the quotas table's `target` index holds each quota under its scope's `quota` key.
 */
export type QuotaKeyOf = 'global' | 'local' | 'quota';

const QUOTA_KEY_PREFIXES: Record<QuotaKeyOf, Record<QuotaScopeKind, string>> = {
  global: { AuthMethod: `Gm${SEP}`, Namespace: `Gn${SEP}`, Partition: `Gp${SEP}` },
  local: { AuthMethod: `Lm${SEP}`, Namespace: `Ln${SEP}`, Partition: `Lp${SEP}` },
  quota: { AuthMethod: `Qm${SEP}`, Namespace: `Qn${SEP}`, Partition: `Qp${SEP}` },
};
const quotaKeys = new Map<string, Map<string, string>>();

/** The key of a scope (`kind`, `name`) of one locality, or of the quotas over it: one string per scope, not one per token. */
export function quotaScopeKey(kind: QuotaScopeKind, name: string, of: QuotaKeyOf): string {
  const prefix = QUOTA_KEY_PREFIXES[of][kind];
  let byName = quotaKeys.get(prefix);
  if (byName === undefined) quotaKeys.set(prefix, (byName = new Map()));
  let k = byName.get(name);
  if (k === undefined) {
    k = prefix + name;
    // At most 10,000 names kept of each kind.
    if (byName.size < 10_000) byName.set(name, k);
  }
  return k;
}

/** The index keys of a quota's count here: a Local quota's, its scope's local key; a global one's, both. */
export const quotaCountKeys = (q: Pick<QuotaRecord, QuotaScopeKind | 'Local'>): string[] => {
  const { kind, name } = quotaScopeOf(q);
  return q.Local ? [quotaScopeKey(kind, name, 'local')] : [quotaScopeKey(kind, name, 'global'), quotaScopeKey(kind, name, 'local')];
};

function quotaScopeKeys(t: Pick<TokenRecord, 'AuthMethod' | 'Namespace' | 'Partition' | 'Local'>, emit: (key: string) => void): void {
  const of = t.Local ? 'local' : 'global';
  if (t.AuthMethod) emit(quotaScopeKey('AuthMethod', t.AuthMethod, of));
  emit(quotaScopeKey('Namespace', t.Namespace, of));
  emit(quotaScopeKey('Partition', t.Partition, of));
}

/** The token indexes by what grants: who can (service/who-can.ts) finds the tokens a policy, role, identity or template reaches. */
export type TokenGrantIndex = 'policy' | 'role' | 'service' | 'node' | 'template';

export const tokensTable: TableDef<
  TokenRecord,
  'secret' | 'previousSecret' | 'scope' | TokenGrantIndex | 'authMethod' | 'local' | 'created' | 'quota'
> = {
  name: 'tokens',
  prefix: 't',
  fields: TOKEN_FIELDS,
  schema: tokenRecordSchema,
  id: (t) => t.AccessorID,
  isGlobal: (t) => !t.Local,
  indexes: {
    secret: { unique: true, reads: ['SecretID'], keys: (t, emit) => emit(t.SecretID) },
    /** The secret a rotation replaced, while it may still authenticate (docs/operator-insight.md, "Rotating a secret"). */
    previousSecret: {
      unique: true,
      reads: ['PreviousSecretID'],
      keys: (t, emit) => t.PreviousSecretID !== undefined && emit(t.PreviousSecretID),
    },
    scope: { unique: false, reads: ['Partition', 'Namespace'], keys: (t, emit) => emit(scopeKey(t.Partition, t.Namespace)) },
    policy: { unique: false, reads: ['Policies'], keys: (t, emit) => t.Policies.forEach((l) => emit(l.ID)) },
    role: { unique: false, reads: ['Roles'], keys: (t, emit) => t.Roles.forEach((l) => emit(l.ID)) },
    service: { unique: false, reads: ['ServiceIdentities'], keys: (t, emit) => t.ServiceIdentities.forEach((s) => emit(s.ServiceName)) },
    node: { unique: false, reads: ['NodeIdentities'], keys: (t, emit) => t.NodeIdentities.forEach((n) => emit(n.NodeName)) },
    template: { unique: false, reads: ['TemplatedPolicies'], keys: (t, emit) => t.TemplatedPolicies.forEach((p) => emit(p.TemplateName)) },
    authMethod: { unique: false, reads: ['AuthMethod'], keys: (t, emit) => t.AuthMethod && emit(t.AuthMethod) },
    local: { unique: false, reads: ['Local'], keys: (t, emit) => t.Local && emit('') },
    created: { unique: false, reads: ['CreateTime'], keys: (t, emit) => emit(createdHour(t.CreateTime)) },
    quota: { unique: false, reads: ['AuthMethod', 'Namespace', 'Partition', 'Local'], keys: quotaScopeKeys },
  },
  orderedBy: { reads: ['ExpirationTime'], time: expiryMillis },
};

export const policiesTable: TableDef<PolicyRecord, 'name' | 'scope'> = {
  name: 'policies',
  prefix: 'p',
  fields: POLICY_FIELDS,
  schema: policyRecordSchema,
  id: (p) => p.ID,
  isGlobal: () => true,
  indexes: {
    name: { unique: true, reads: ['Partition', 'Namespace', 'Name'], keys: (p, emit) => emit(nameKey(p.Partition, p.Namespace, p.Name)) },
    scope: { unique: false, reads: ['Partition', 'Namespace'], keys: (p, emit) => emit(scopeKey(p.Partition, p.Namespace)) },
  },
};

export const rolesTable: TableDef<RoleRecord, 'name' | 'scope' | 'policy'> = {
  name: 'roles',
  prefix: 'r',
  fields: ROLE_FIELDS,
  schema: roleRecordSchema,
  id: (r) => r.ID,
  isGlobal: () => true,
  indexes: {
    name: { unique: true, reads: ['Partition', 'Namespace', 'Name'], keys: (r, emit) => emit(nameKey(r.Partition, r.Namespace, r.Name)) },
    scope: { unique: false, reads: ['Partition', 'Namespace'], keys: (r, emit) => emit(scopeKey(r.Partition, r.Namespace)) },
    policy: { unique: false, reads: ['Policies'], keys: (r, emit) => r.Policies.forEach((l) => emit(l.ID)) },
  },
};

/** An auth method's ID: its place and name (names are unique per place, and case-sensitive as Consul's). */
export const authMethodID = (partition: string, namespace: string, name: string): string => key(partition, namespace, name);

export const authMethodsTable: TableDef<AuthMethodRecord, 'scope'> = {
  name: 'authMethods',
  prefix: 'am',
  fields: AUTH_METHOD_FIELDS,
  schema: authMethodRecordSchema,
  id: (m) => authMethodID(m.Partition, m.Namespace, m.Name),
  isGlobal: () => true,
  indexes: {
    scope: { unique: false, reads: ['Partition', 'Namespace'], keys: (m, emit) => emit(scopeKey(m.Partition, m.Namespace)) },
  },
};

export const bindingRulesTable: TableDef<BindingRuleRecord, 'scope' | 'method'> = {
  name: 'bindingRules',
  prefix: 'br',
  fields: BINDING_RULE_FIELDS,
  schema: bindingRuleRecordSchema,
  id: (r) => r.ID,
  isGlobal: () => true,
  indexes: {
    scope: { unique: false, reads: ['Partition', 'Namespace'], keys: (r, emit) => emit(scopeKey(r.Partition, r.Namespace)) },
    method: {
      unique: false,
      reads: ['Partition', 'Namespace', 'AuthMethod'],
      keys: (r, emit) => emit(authMethodID(r.Partition, r.Namespace, r.AuthMethod)),
    },
  },
};

/** A quota's scope, as its record names it (exactly one of the three is set). */
export function quotaScopeOf(q: Pick<QuotaRecord, QuotaScopeKind>): { kind: QuotaScopeKind; name: string } {
  if (q.AuthMethod) return { kind: 'AuthMethod', name: q.AuthMethod };
  if (q.Namespace) return { kind: 'Namespace', name: q.Namespace };
  return { kind: 'Partition', name: q.Partition };
}

export const quotasTable: TableDef<QuotaRecord, 'name' | 'target'> = {
  name: 'quotas',
  prefix: 'q',
  fields: QUOTA_FIELDS,
  schema: quotaRecordSchema,
  id: (q) => q.ID,
  isGlobal: (q) => !q.Local,
  indexes: {
    name: { unique: true, reads: ['Name'], keys: (q, emit) => emit(q.Name.toLowerCase()) },
    /** The quotas of a scope, by the key tokens of that scope are counted under (the global one's). */
    target: {
      unique: false,
      reads: ['AuthMethod', 'Namespace', 'Partition'],
      keys: (q, emit) => {
        const { kind, name } = quotaScopeOf(q);
        emit(quotaScopeKey(kind, name, 'quota'));
      },
    },
  },
};

export const TABLES = {
  tokens: tokensTable,
  policies: policiesTable,
  roles: rolesTable,
  authMethods: authMethodsTable,
  bindingRules: bindingRulesTable,
  quotas: quotasTable,
} as const satisfies Record<TableName, unknown>;

/** Each table's record type, as its definition in `TABLES` declares it. */
export type RecordTypes = { [T in TableName]: (typeof TABLES)[T] extends TableDef<infer R, string> ? R : never };

/** One array of records per table (snapshots, the secondary's view of the global objects). */
export type RecordsByTable = { [T in TableName]: Array<RecordTypes[T]> };

/** Empty arrays, one per table. */
export function emptyRecords(): RecordsByTable {
  return Object.fromEntries(TABLE_NAMES.map((t) => [t, []])) as unknown as RecordsByTable;
}

/** Appends `from`'s records of table `t` to `into`'s. */
export function appendRecords<T extends TableName>(into: RecordsByTable, from: RecordsByTable, t: T): void {
  const target: Array<RecordTypes[T]> = into[t];
  for (const r of from[t]) target.push(r);
}

/** Every table's definition by name, typed by its record (checked against TABLES, no cast). */
export const TABLE_DEFS: { readonly [T in TableName]: TableDef<RecordTypes[T], string> } = TABLES;

export type IndexName<T extends TableName> = keyof (typeof TABLES)[T]['indexes'] & string;

/** A record's key: `key(prefix, id)`, written out (every write and delete makes one). */
export const recordKey = (table: TableName, id: string): string => `${TABLES[table].prefix}${SEP}${id}`;

/**
 * Version of the on-disk layout. 1: records plus secondary-index keys; 2: records only, as msgpack
 * maps; 3: tokens in the positional form a compact table keeps in memory (compact/positional.ts),
 * the other records as in 2. Every data dir is brought to 2 at open; to 3 once the cluster's
 * upgrade is finalized at a level whose servers all read it (disk-format.ts, `upgradeFormat`).
 */
export const FORMAT_VERSION = 2;
export const POSITIONAL_FORMAT = 3;
/** The finalized level whose servers all read format 3: release 0.2.0's protocols (replication 5, servers' stream 3). */
export const POSITIONAL_FORMAT_NEEDS = { replication: 5, servers: 3 } as const;

export const META = {
  format: key('m', 'format'),
  index: key('m', 'index'),
  tableIndex: (t: TableName | 'bootstrap') => key('m', 'tidx', t),
  bootstrap: key('m', 'bootstrap'),
  logID: key('m', 'log-id'),
  /** Highest change-log index removed by retention (0: nothing removed yet). */
  logTrimmed: key('m', 'log-trimmed'),
  /** A secondary's place in the primary's log (and the highest primary epoch it has seen). */
  cursor: key('m', 'cursor'),
  /** The primary's epoch (docs/datacenters.md): 1 for the first primary, raised by each promotion; absent means 1. */
  primaryEpoch: key('m', 'primary-epoch'),
  /**
   * The primary this datacenter follows, or itself, once a promotion, a handover or a newer epoch
   * learned from a peer has moved it (docs/datacenters.md): it outranks the configuration from then on.
   */
  placement: key('m', 'placement'),
  /** Addresses of the other datacenters a primary has seen (asked at its next start whether a newer primary exists). */
  knownDatacenters: key('m', 'known-datacenters'),
  /** The datacenter the store belongs to. */
  datacenter: key('m', 'datacenter'),
  /** Written to find out whether the disk takes writes again after a write error. */
  probe: key('m', 'probe'),
  /** Sequence number of the last server batch (HA: the stream followers apply). */
  serverSeq: key('m', 'server-seq'),
  /** Leadership term that wrote the last server batch. */
  serverTerm: key('m', 'server-term'),
  /** The datacenter's key the audit log names unknown secrets with (an HMAC of them); made by its first leader. */
  auditKey: key('m', 'audit-key'),
  /** The level the cluster's upgrade was finalized at (replication/releases.ts): what every server then ran. */
  finalized: key('m', 'upgrade-finalized'),
} as const;

export const hex = (n: number): string => n.toString(16).padStart(16, '0');
/** The exclusive upper bound of every key starting with `prefix`. */
export const prefixEnd = (prefix: string): string => `${prefix}\uffff`;
export const LOG_PREFIX = key('l', '');
/** A token's last use as its leader last wrote it (store/last-use.ts): milliseconds, by AccessorID. */
export const LAST_USE_PREFIX = key('u', '');
export const lastUseKey = (accessor: string): string => `u${SEP}${accessor}`;
export const logKey = (index: number): string => key('l', hex(index));
/** The index a change-log key names. */
export const logIndexOf = (logEntryKey: string): number => Number.parseInt(logEntryKey.slice(LOG_PREFIX.length), 16);

/** Key prefixes of the secondary indexes format 1 stored on disk (dropped when upgrading to 2). */
export const FORMAT1_INDEX_PREFIXES = ['ts', 'tn', 'tp', 'tr', 'tsv', 'tam', 'tx', 'tl', 'pn', 'pl', 'rn', 'rl', 'rp'].map((p) =>
  key(p, ''),
);
export const FORMAT1_COUNT_PREFIX = key('m', 'count', '');

/** Whether any table declares a field of a record form later than `form` (none but in a test build). */
export function hasLaterForms(form: number): boolean {
  return TABLE_NAMES.some((t) => Object.values(TABLES[t].fields).some((f) => (f.form ?? 1) > form));
}

/** Whether a record of `table` holds no field of a form later than `form`: a peer speaking `form` can hold it whole. */
export function fitsForm(table: TableName, record: object, form: number): boolean {
  return laterForms(TABLES[table].fields, record).every((f) => f <= form);
}
