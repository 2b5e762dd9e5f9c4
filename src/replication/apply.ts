import type { AuthMethodRecord, TokenRecord } from '../domain/types.js';
import { META, type TableName } from '../store/schema.js';
import type { Change, LogEntry, RecordSet, Tx } from '../store/store.js';

/** Where a secondary is in the primary's log: stored in the same batch as what it applied. */
export interface Cursor {
  /** Identity of the primary log followed. */
  logID: string;
  /** Last primary index applied (the stream is complete up to it). */
  index: number;
  /** The highest primary epoch seen (docs/datacenters.md); absent in cursors written before epochs: 1. */
  epoch?: number;
  /** When it was written (ms since the epoch): the last frame of the primary applied here, for a promotion's report. */
  at?: number;
  /**
   * The record form the stream spoke when this was applied (absent: 1). A secondary that now speaks
   * a later form fetches everything again (a snapshot): what it holds may lack fields its primary's
   * records have, and their Hash would never say so (hashicorp/consul#9022).
   */
  form?: number;
  /**
   * The replication version whose tables the stream that brought this state carried (absent: the
   * first release's). A secondary that now speaks a version carrying a table its cursor's did not
   * fetches everything again: changes to that table were withheld from it (a quota made while it
   * ran the previous release).
   */
  tables?: number;
}

/** The first primary's epoch: what a store or a frame without one means. */
export const FIRST_EPOCH = 1;

/** A primary's own epoch, as its store keeps it (docs/datacenters.md). */
export const primaryEpochOf = (store: { getMeta(key: string): unknown }): number => Number(store.getMeta(META.primaryEpoch) ?? FIRST_EPOCH);

/**
 * The highest primary epoch this datacenter has seen: its replication cursor's, the one its
 * placement names (a promotion, a handover, a newer primary learned from a peer), or its own.
 */
export const epochSeenBy = (store: { getMeta(key: string): unknown }): number => {
  const placed = (store.getMeta(META.placement) as { Epoch?: unknown } | undefined)?.Epoch;
  return Math.max(
    (store.getMeta(META.cursor) as Cursor | undefined)?.epoch ?? FIRST_EPOCH,
    typeof placed === 'number' ? placed : FIRST_EPOCH,
    primaryEpochOf(store),
  );
};

/** Canonical text of a record without this datacenter's indexes: equal text, equal object. */
export function contentOf(record: object): string {
  const { CreateIndex: _c, ModifyIndex: _m, ...rest } = record as Record<string, unknown>;
  return JSON.stringify(rest, (_k, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

/**
 * A global token that was not applied because a Local token of this datacenter holds
 * its secret. The Local owner keeps it (it was here first and is in use here); the
 * conflict is reported in the replication status until the global token is deleted.
 */
export interface SecretConflict {
  AccessorID: string;
  LocalAccessorID: string;
}

/** What applying a batch found: conflicts that appeared and global tokens whose conflict ended. */
export interface ApplyOutcome {
  conflicts: SecretConflict[];
  resolved: string[];
}

/**
 * Applies primary changes at the transaction's current index (the store stamps this
 * datacenter's CreateIndex and ModifyIndex). Local tokens are never overwritten or deleted.
 */
function applyChanges(tx: Tx, changes: readonly Change[], outcome: ApplyOutcome): void {
  for (const c of changes) {
    if (c.Op === 'expire') {
      // The primary's reaper deleted every global token up to here in the expiry order; this
      // datacenter holds the same global tokens at this index, so its own expiry index names them.
      for (const id of tx.reapGlobalExpiredThrough(c.Value)) outcome.resolved.push(id);
      continue;
    }
    if (c.Op === 'delete') {
      if (c.Table === 'tokens') {
        outcome.resolved.push(c.ID);
        if (tx.getToken(c.ID)?.Local === false) tx.del('tokens', c.ID);
      } else if (c.Table === 'authMethods') {
        const method = tx.getRecord('authMethods', c.ID);
        tx.del('authMethods', c.ID);
        // The tokens it issued here go with it: the global ones arrive as their own deletes,
        // Local ones exist only in this datacenter.
        if (method) for (const t of localTokensOf(tx, method)) tx.del('tokens', t.AccessorID);
      } else {
        tx.del(c.Table, c.ID);
      }
      continue;
    }
    if (c.Table === 'bootstrap') {
      tx.putBootstrap(c.Value);
    } else if (c.Table === 'tokens') {
      if (c.Value.Local || tx.getToken(c.ID)?.Local) continue;
      const holder = tx.getTokenBySecret(c.Value.SecretID);
      if (holder && holder.AccessorID !== c.ID && holder.Local) {
        outcome.conflicts.push({ AccessorID: c.ID, LocalAccessorID: holder.AccessorID });
        continue;
      }
      tx.put('tokens', c.Value);
    } else {
      putRecord(tx, c);
    }
  }
}

/** A record of any table, as the primary sent it. */
function putRecord<T extends TableName>(tx: Tx, c: RecordSet<T>): void {
  tx.put(c.Table, c.Value);
}

/** Local tokens an auth method issued in this datacenter, through the tokens' auth-method index. */
function localTokensOf(tx: Tx, method: AuthMethodRecord): TokenRecord[] {
  return tx
    .tokenIDsOfAuthMethod(method.Name)
    .map((id) => tx.getToken(id))
    .filter(
      (t): t is TokenRecord =>
        t?.Local === true && t.Partition === method.Partition && (t.AuthMethodNamespace ?? t.Namespace) === method.Namespace,
    );
}

/** Applies log entries in order, each at its own local index, and moves the cursor in the same batch. */
export function applyEntries(tx: Tx, entries: readonly LogEntry[], cursor: Cursor): ApplyOutcome {
  const outcome: ApplyOutcome = { conflicts: [], resolved: [] };
  for (const entry of entries) {
    tx.nextIndex();
    applyChanges(tx, entry.Changes, outcome);
  }
  tx.putMeta(META.cursor, cursor);
  return outcome;
}
