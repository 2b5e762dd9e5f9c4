import type { AuthMethodRecord, BindingRuleRecord, BootstrapState, PolicyRecord, RoleRecord, TokenRecord } from '../domain/types.js';
import { META, authMethodID } from '../store/schema.js';
import type { Change, LogEntry, Tx } from '../store/store.js';

/** Where a secondary is in the primary's log: stored in the same batch as what it applied. */
export interface Cursor {
  /** Identity of the primary log followed. */
  logID: string;
  /** Last primary index applied (the stream is complete up to it). */
  index: number;
}

export interface GlobalState {
  tokens: TokenRecord[];
  policies: PolicyRecord[];
  roles: RoleRecord[];
  authMethods: AuthMethodRecord[];
  bindingRules: BindingRuleRecord[];
  bootstrap: BootstrapState | null;
}

/** Canonical text of a record without this datacenter's indexes: equal text, equal object. */
function contentOf(record: object): string {
  const { CreateIndex: _c, ModifyIndex: _m, ...rest } = record as Record<string, unknown>;
  return JSON.stringify(rest, (_k, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

function diffTable<R extends object>(table: 'tokens' | 'policies' | 'roles' | 'authMethods' | 'bindingRules', idOf: (r: R) => string, current: R[], wanted: R[]): Change[] {
  const have = new Map(current.map((r) => [idOf(r), contentOf(r)]));
  const out: Change[] = [];
  const keep = new Set<string>();
  for (const r of wanted) {
    const id = idOf(r);
    keep.add(id);
    const held = have.get(id);
    if (held === undefined || held !== contentOf(r)) out.push({ Table: table, Op: 'set', ID: id, Value: r } as Change);
  }
  for (const id of have.keys()) if (!keep.has(id)) out.push({ Table: table, Op: 'delete', ID: id });
  return out;
}

/**
 * What a secondary must change so its global objects equal a snapshot of the
 * primary: writes for new and changed objects, deletes for objects the primary no
 * longer has. Pure; `current` must hold global objects only (never Local tokens).
 */
export function diffSnapshot(current: GlobalState, snapshot: GlobalState): Change[] {
  const changes = [
    ...diffTable('policies', (p: PolicyRecord) => p.ID, current.policies, snapshot.policies),
    ...diffTable('roles', (r: RoleRecord) => r.ID, current.roles, snapshot.roles),
    ...diffTable('authMethods', (m: AuthMethodRecord) => authMethodID(m.Partition, m.Namespace, m.Name), current.authMethods, snapshot.authMethods),
    ...diffTable('bindingRules', (r: BindingRuleRecord) => r.ID, current.bindingRules, snapshot.bindingRules),
    ...diffTable('tokens', (t: TokenRecord) => t.AccessorID, current.tokens, snapshot.tokens),
  ];
  if (snapshot.bootstrap && contentOf(snapshot.bootstrap) !== (current.bootstrap ? contentOf(current.bootstrap) : '')) {
    changes.push({ Table: 'bootstrap', Op: 'set', ID: 'bootstrap', Value: snapshot.bootstrap });
  }
  return changes;
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
    if (c.Op === 'delete') {
      if (c.Table === 'tokens') {
        outcome.resolved.push(c.ID);
        if (tx.getToken(c.ID)?.Local === false) tx.deleteToken(c.ID);
      } else if (c.Table === 'policies') {
        tx.deletePolicy(c.ID);
      } else if (c.Table === 'roles') {
        tx.deleteRole(c.ID);
      } else if (c.Table === 'authMethods') {
        const method = tx.getRecord('authMethods', c.ID);
        tx.deleteAuthMethod(c.ID);
        // The tokens it issued here go with it: the global ones arrive as their own deletes,
        // Local ones exist only in this datacenter.
        if (method) for (const t of localTokensOf(tx, method)) tx.deleteToken(t.AccessorID);
      } else if (c.Table === 'bindingRules') {
        tx.deleteBindingRule(c.ID);
      }
      continue;
    }
    switch (c.Table) {
      case 'tokens': {
        if (c.Value.Local || tx.getToken(c.ID)?.Local) continue;
        const holder = tx.getTokenBySecret(c.Value.SecretID);
        if (holder && holder.AccessorID !== c.ID && holder.Local) {
          outcome.conflicts.push({ AccessorID: c.ID, LocalAccessorID: holder.AccessorID });
          continue;
        }
        tx.putToken(c.Value);
        break;
      }
      case 'policies':
        tx.putPolicy(c.Value);
        break;
      case 'roles':
        tx.putRole(c.Value);
        break;
      case 'authMethods':
        tx.putAuthMethod(c.Value);
        break;
      case 'bindingRules':
        tx.putBindingRule(c.Value);
        break;
      case 'bootstrap':
        tx.putBootstrap(c.Value);
        break;
    }
  }
}

/** Local tokens an auth method issued in this datacenter, through the tokens' auth-method index. */
function localTokensOf(tx: Tx, method: AuthMethodRecord): TokenRecord[] {
  return tx
    .tokenIDsOfAuthMethod(method.Name)
    .map((id) => tx.getToken(id))
    .filter((t): t is TokenRecord => t?.Local === true && t.Partition === method.Partition && (t.AuthMethodNamespace ?? t.Namespace) === method.Namespace);
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

/** Makes the secondary's global objects equal the snapshot, leaving Local tokens alone, and sets the cursor. */
export function applySnapshot(tx: Tx, snapshot: GlobalState, cursor: Cursor): ApplyOutcome & { changed: number } {
  const current: GlobalState = {
    tokens: tx.allRecords('tokens').filter((t) => !t.Local),
    policies: tx.allRecords('policies'),
    roles: tx.allRecords('roles'),
    authMethods: tx.allRecords('authMethods'),
    bindingRules: tx.allRecords('bindingRules'),
    bootstrap: tx.getBootstrap(),
  };
  const changes = diffSnapshot(current, snapshot);
  // A snapshot states every conflict anew.
  const outcome: ApplyOutcome = { conflicts: [], resolved: [] };
  if (changes.length > 0) {
    tx.nextIndex();
    applyChanges(tx, changes, outcome);
  }
  tx.putMeta(META.cursor, cursor);
  return { ...outcome, changed: changes.length };
}
