// What a secondary can hold, by the replication version its stream speaks (docs/upgrading.md,
// "Upgrading"): a record of a later form than it knows is never sent in part, and a table it does
// not know is not named at all.
import { recordFormOf } from './releases.js';
import { type RecordsByTable, TABLE_NAMES, fitsForm, hasLaterForms, tablesSpoken } from '../store/schema.js';
import type { Change } from '../store/store.js';

/**
 * Entries as a secondary speaking `version` can hold them: a record carrying a field of a later
 * form goes as a delete (it holds none of it until it speaks that form, and then fetches
 * everything again: secondary-stream.ts); changes to a table it does not know are left out.
 */
export function fittedEntries<E extends { Changes: Change[] }>(entries: E[], version: number): E[] {
  const form = recordFormOf(version);
  const spoken = tablesSpoken(version);
  if (!hasLaterForms(form) && spoken.length === TABLE_NAMES.length) return entries;
  return entries.map((e) => ({
    ...e,
    Changes: e.Changes.filter((c) => c.Table === 'bootstrap' || spoken.includes(c.Table)).map((c) =>
      c.Op === 'set' && c.Table !== 'bootstrap' && !fitsForm(c.Table, c.Value, form)
        ? { Table: c.Table, Op: 'delete' as const, ID: c.ID }
        : c,
    ),
  }));
}

/** A snapshot chunk as a secondary speaking `version` can hold it: records of a later form left out, tables it does not know not named. */
export function fittedRecords(records: RecordsByTable, version: number): RecordsByTable {
  const form = recordFormOf(version);
  const spoken = tablesSpoken(version);
  if (!hasLaterForms(form) && spoken.length === TABLE_NAMES.length) return records;
  // A table left out is not named at all (a frame of that version has no such member; this one reads it as none).
  return Object.fromEntries(
    spoken.map((t) => [t, (records[t] as object[]).filter((r) => fitsForm(t, r, form))]),
  ) as unknown as RecordsByTable;
}
