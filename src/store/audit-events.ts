import { quoteJSON } from '../domain/json-text.js';
import type { StagedStore } from './staging.js';
import { META, type TableName } from './schema.js';
import type { AuditObjectKind } from '../domain/audit-types.js';
import type { StoreTx } from './store-tx.js';
import type { AuditGroupEvent, AuditRecord } from './store.js';

/** Audit kinds of the tables: what an audit line calls an object. */
export const AUDIT_KIND: Record<TableName, AuditObjectKind> = {
  tokens: 'token',
  policies: 'policy',
  roles: 'role',
  authMethods: 'auth-method',
  bindingRules: 'binding-rule',
  quotas: 'quota',
};
/** At most this many objects are named in one audit line (a reaper batch can delete thousands); the rest are counted. */
const AUDIT_OBJECTS = 100;

/**
 * A transaction's audit event (it rides with the transaction's group commit): the record given,
 * and as `raw` JSON members the index and every object the transaction changed (built as text:
 * no object per changed record).
 */
export function auditEventOf(tx: StoreTx, record: AuditRecord, durableIndex: number): AuditGroupEvent {
  const ops = tx.tableOps;
  const shown = Math.min(ops.length, AUDIT_OBJECTS);
  let objects = '';
  for (let i = 0; i < shown; i++) {
    const op = ops[i] as (typeof ops)[number];
    const r = op.record as { Name?: string; Namespace?: string; Partition?: string; Hash?: string } | null;
    let o = `{"Kind":"${AUDIT_KIND[op.table]}","ID":${quoteJSON(op.id)}`;
    if (r === null) o += ',"Deleted":true';
    else {
      if (r.Name !== undefined && op.table !== 'authMethods') o += `,"Name":${quoteJSON(r.Name)}`;
      if (r.Namespace !== undefined) o += `,"Namespace":${quoteJSON(r.Namespace)}`;
      if (r.Partition !== undefined) o += `,"Partition":${quoteJSON(r.Partition)}`;
      if (r.Hash !== undefined) o += `,"Hash":${quoteJSON(r.Hash)}`;
    }
    objects += i === 0 ? `${o}}` : `,${o}}`;
  }
  const more = ops.length - shown;
  const raw = `"Index":${tx.lastIndex ?? durableIndex},"Objects":[${objects}]${more > 0 ? `,"MoreObjects":${more}` : ''}`;
  return { type: record.type, actor: record.actor, details: record.details ?? {}, raw };
}

/** The audit event of a switch to a staged store: the record given, at the index the staged store has. */
export function installAuditEvent(record: AuditRecord, staged: StagedStore, durableIndex: number): AuditGroupEvent {
  const index = Number(staged.meta.get(META.index) ?? durableIndex);
  return { type: record.type, actor: record.actor, details: record.details ?? {}, raw: `"Index":${index}` };
}
