import type { PolicyRecord, RoleRecord, TokenRecord } from '../domain/types.js';
import { expiryMillis } from '../domain/expiry.js';

/**
 * The keyspace. Keys are utf8 strings of parts joined by NUL (no name the API accepts
 * contains NUL), numbers written as fixed-width hex so byte order is numeric order.
 *
 *   t  <accessor>                    token record
 *   ts <secret>                      -> accessor (unique)
 *   tn <partition> <ns> <accessor>   tokens by namespace
 *   tp <policyID> <accessor>         tokens by linked policy
 *   tr <roleID> <accessor>           tokens by linked role
 *   tsv <service> <accessor>         tokens by service identity
 *   tam <method> <accessor>          tokens by auth method
 *   tx <expiry hex> <accessor>       tokens by expiration time
 *   tl <accessor>                    Local tokens
 *   p  <id> / pn <part> <ns> <lower name> -> id / pl <part> <ns> <id>
 *   r  <id> / rn <part> <ns> <lower name> -> id / rl <part> <ns> <id> / rp <policyID> <roleID>
 *   m  <name>                        metadata (indexes, bootstrap state, log identity, cursor)
 *   l  <index hex>                   change log (primary)
 */
export const SEP = '\u0000';

export const key = (...parts: string[]): string => parts.join(SEP);

/** The exclusive upper bound of every key starting with `prefix`. */
export const prefixEnd = (prefix: string): string => prefix + '\uffff';

export const hex = (n: number): string => n.toString(16).padStart(16, '0');

export const fromHex = (s: string): number => parseInt(s, 16);

/** Last part of a key (the object ID in index keys). */
export const lastPart = (k: string): string => k.slice(k.lastIndexOf(SEP) + 1);

export type TableName = 'tokens' | 'policies' | 'roles';

export interface TableDef<R> {
  name: TableName;
  /** Prefix of record keys. */
  prefix: string;
  id(record: R): string;
  /** Secondary index entries of a record: [key, value]; value is the ID for unique indexes, '' otherwise. */
  indexes(record: R): Array<[string, string]>;
  /** Whether a change to this record enters the replicated change log. */
  isGlobal(record: R): boolean;
}

export const recordKey = (def: TableDef<unknown>, id: string): string => key(def.prefix, id);

export const tokensTable: TableDef<TokenRecord> = {
  name: 'tokens',
  prefix: 't',
  id: (t) => t.AccessorID,
  indexes(t) {
    const id = t.AccessorID;
    const out: Array<[string, string]> = [
      [key('ts', t.SecretID), id],
      [key('tn', t.Partition, t.Namespace, id), ''],
    ];
    for (const p of t.Policies) out.push([key('tp', p.ID, id), '']);
    for (const r of t.Roles) out.push([key('tr', r.ID, id), '']);
    for (const s of t.ServiceIdentities) out.push([key('tsv', s.ServiceName, id), '']);
    if (t.AuthMethod) out.push([key('tam', t.AuthMethod, id), '']);
    const exp = expiryMillis(t);
    if (exp !== undefined) out.push([key('tx', hex(Math.max(0, exp)), id), '']);
    if (t.Local) out.push([key('tl', id), '']);
    return out;
  },
  isGlobal: (t) => !t.Local,
};

export const policiesTable: TableDef<PolicyRecord> = {
  name: 'policies',
  prefix: 'p',
  id: (p) => p.ID,
  indexes: (p) => [
    [key('pn', p.Partition, p.Namespace, p.Name.toLowerCase()), p.ID],
    [key('pl', p.Partition, p.Namespace, p.ID), ''],
  ],
  isGlobal: () => true,
};

export const rolesTable: TableDef<RoleRecord> = {
  name: 'roles',
  prefix: 'r',
  id: (r) => r.ID,
  indexes(r) {
    const out: Array<[string, string]> = [
      [key('rn', r.Partition, r.Namespace, r.Name.toLowerCase()), r.ID],
      [key('rl', r.Partition, r.Namespace, r.ID), ''],
    ];
    for (const p of r.Policies) out.push([key('rp', p.ID, r.ID), '']);
    return out;
  },
  isGlobal: () => true,
};

export const TABLES = { tokens: tokensTable, policies: policiesTable, roles: rolesTable } as const;

export const META = {
  index: key('m', 'index'),
  tableIndex: (t: TableName | 'bootstrap') => key('m', 'tidx', t),
  bootstrap: key('m', 'bootstrap'),
  logID: key('m', 'log-id'),
  /** Highest change-log index removed by retention (0: nothing removed yet). */
  logTrimmed: key('m', 'log-trimmed'),
  cursor: key('m', 'cursor'),
  count: (t: TableName) => key('m', 'count', t),
} as const;

export const LOG_PREFIX = key('l', '');
export const logKey = (index: number): string => key('l', hex(index));
