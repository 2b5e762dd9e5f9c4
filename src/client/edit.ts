import { type FieldTable, RECORD_FIELDS, type RecordKind } from '../domain/records.js';

/** What a caller without acl:write reads in place of a secret: never sent back. */
const HIDDEN = '<hidden>';

/**
 * The body of a write that changes nothing, made from a record as it was read (Consul's CLI
 * edits the same way: read, change what a flag names, write back): every field a write takes,
 * as read, links by ID; the fields the server sets left out, and a secret shown as `<hidden>`.
 * An edit spreads its changes over this, so a field it does not know is kept, never erased.
 */
export function unchangedBody(kind: RecordKind | FieldTable, read: object): Record<string, unknown> {
  const fields: FieldTable = typeof kind === 'string' ? RECORD_FIELDS[kind] : kind;
  const r = read as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(fields)) {
    if (spec.api === 'echoed') continue;
    const v = r[name];
    if (v === undefined) continue;
    if (spec.view === 'secret' && v === HIDDEN) continue;
    out[name] = spec.kind === 'links' && Array.isArray(v) ? v.map((l: { ID: string }) => ({ ID: l.ID })) : v;
  }
  return out;
}
