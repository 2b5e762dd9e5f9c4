import type { AuthMethodRecord, BootstrapState, TokenRecord } from '../domain/types.js';
import type { Tables } from '../store/memory.js';
import type { AnyTable, RecordList } from '../store/table.js';
import type { AuditObjectKind } from '../domain/audit-types.js';
import { AUDIT_KIND } from '../store/audit-events.js';
import { META, type RecordTypes, TABLE_DEFS, TABLE_NAMES, type TableName, authMethodID } from '../store/schema.js';
import type { StagedStore } from '../store/staging.js';
import type { CatchUpStore } from '../store/store.js';
import { type ApplyOutcome, type Cursor, type SecretConflict, contentOf } from './apply.js';
import type { SnapshotFrame } from './protocol.js';

/** A global object held here that a new primary's snapshot replaced or removed (docs/datacenters.md: rolled back). */
export interface RolledBack {
  Kind: AuditObjectKind;
  ID: string;
  /** Its content hash as held here (tokens, policies, roles). */
  Hash?: string;
  /** Gone from the new primary; else replaced by its version. */
  Deleted?: true;
}

/** What a finished catch-up did. */
export interface CatchUpOutcome extends ApplyOutcome {
  /** Objects written or deleted (0: the secondary already held the snapshot's state). */
  changed: number;
  /** Global records the snapshot holds. */
  records: number;
  /** With `listRolledBack`: every global object held here that the snapshot replaced or removed. */
  rolledBack?: RolledBack[];
}

/**
 * A secondary taking the primary's snapshot (docs/datacenters.md: Multiple datacenters) in bounded memory:
 * each chunk's records go into a staged store (store/staging.ts) as they arrive, compared
 * with what this datacenter holds: an object unchanged keeps this datacenter's indexes (the
 * same object, not a copy), a new or changed one is stamped with the index reserved when the
 * catch-up began. At the end, with writes held, this datacenter's Local tokens and metadata are
 * added and the staged store is made current in one step: readers see the old state whole
 * until then, and the new one whole after. Local tokens keep what is theirs, as when entries
 * are applied: a global token whose ID or secret a Local token holds is left out (a conflict),
 * and the Local tokens of an auth method the primary no longer has go with it.
 */
export class CatchUp {
  private readonly changedIn = new Map<TableName, number>();
  private readonly unchangedIn = new Map<TableName, number>();
  /** Of `changedIn`, the objects held here before (the rest are new). */
  private readonly heldChanged = new Map<TableName, number>();
  /** Local tokens left out: their auth method is gone. */
  private localsDropped = 0;
  private readonly conflicts: SecretConflict[] = [];
  private bootstrap: BootstrapState | null = null;
  private records = 0;
  /** Held objects the snapshot replaced, when they are listed. */
  private readonly replaced: RolledBack[] | undefined;

  private constructor(
    private readonly store: CatchUpStore,
    private readonly staged: StagedStore,
    /** The index the snapshot's new and changed objects are stamped with. */
    private readonly index: number,
    listRolledBack: boolean,
    /** Only objects held with a ModifyIndex above this are listed (this datacenter's own writes after a takeover). */
    private readonly changedAfter: number,
  ) {
    if (listRolledBack) this.replaced = [];
  }

  /**
   * `listRolledBack`: the snapshot comes from a new primary (docs/datacenters.md), and every global object
   * held here that it replaces or removes is listed in the outcome (the audit log names them).
   */
  static async begin(store: CatchUpStore, options: { listRolledBack?: boolean; changedAfter?: number } = {}): Promise<CatchUp> {
    const staged = await store.stage();
    return new CatchUp(store, staged, store.allocateIndex(), options.listRolledBack === true, options.changedAfter ?? -1);
  }

  /** One chunk's records, staged in order. */
  async add(frame: SnapshotFrame): Promise<void> {
    for (const t of TABLE_NAMES) await this.addTable(t, frame[t] ?? []);
    if (frame.bootstrap) this.bootstrap = frame.bootstrap;
  }

  private async addTable<T extends TableName>(table: T, records: ReadonlyArray<RecordTypes[T]>): Promise<void> {
    const current = this.store.tables[table] as AnyTable;
    const def = TABLE_DEFS[table];
    for (const r of records) {
      if (!def.isGlobal(r)) continue;
      this.records++;
      const id = def.id(r);
      const held = current.get(id) as RecordTypes[T] | undefined;
      if (table === 'tokens' && this.leftOut(r as TokenRecord, held as TokenRecord | undefined)) continue;
      if (held !== undefined && contentOf(held) === contentOf(r)) {
        this.unchangedIn.set(table, (this.unchangedIn.get(table) ?? 0) + 1);
        await this.staged.putRecord(table, held);
        continue;
      }
      this.changedIn.set(table, (this.changedIn.get(table) ?? 0) + 1);
      if (held !== undefined) {
        this.heldChanged.set(table, (this.heldChanged.get(table) ?? 0) + 1);
        if (modifiedAfter(held, this.changedAfter)) this.replaced?.push(rolledBack(table, id, held));
      }
      // Stamped in place: the frame's records are this catch-up's own (decoded for it), and become the state.
      const stamped = r as RecordTypes[T] & { CreateIndex: number; ModifyIndex: number };
      stamped.CreateIndex = (held as { CreateIndex?: number } | undefined)?.CreateIndex ?? this.index;
      stamped.ModifyIndex = this.index;
      await this.staged.putRecord(table, stamped);
    }
  }

  /** A global token a Local token of this datacenter stands in the way of (its ID, or its secret). */
  private leftOut(token: TokenRecord, held: TokenRecord | undefined): boolean {
    if (held?.Local) return true;
    const holder = this.store.tables.tokens.byUnique('secret', token.SecretID);
    if (holder && holder.AccessorID !== token.AccessorID && holder.Local) {
      this.conflicts.push({ AccessorID: token.AccessorID, LocalAccessorID: holder.AccessorID });
      return true;
    }
    return false;
  }

  /** Makes the snapshot this datacenter's state, at `cursor` (writes wait meanwhile). */
  async install(cursor: Cursor): Promise<CatchUpOutcome> {
    let outcome: CatchUpOutcome | undefined;
    await this.store.install(this.staged, {
      complete: async (s) => {
        outcome = await this.complete(s, cursor);
      },
    });
    return outcome as CatchUpOutcome;
  }

  /** Gives the catch-up up (a lost connection): the staged store is removed. */
  abandon(): Promise<void> {
    return this.staged.abandon();
  }

  /** With writes held: this datacenter's Local tokens and metadata join the staged store. */
  private async complete(staged: StagedStore, cursor: Cursor): Promise<CatchUpOutcome> {
    staged.endLoading();
    const tables = this.store.tables;
    let changed = 0;
    for (const n of this.changedIn.values()) changed += n;
    // Held here, not in the snapshot: deleted at the primary.
    const deletedIn = new Map<TableName, number>();
    for (const t of TABLE_NAMES) {
      const deleted = globalCount(tables, t) - (this.unchangedIn.get(t) ?? 0) - (this.heldChanged.get(t) ?? 0);
      if (deleted > 0) deletedIn.set(t, deleted);
      changed += Math.max(0, deleted);
    }
    for (const local of [...(tables.tokens.members('local', '') ?? [])]) await this.keepLocal(staged, tables, local);
    // This datacenter's Local quotas stay, as its Local tokens do.
    for (const q of [...tables.quotas.values()]) if (q.Local) await staged.putRecord('quotas', q);
    const at = changed > 0 || this.bootstrapChanged() ? this.store.allocateIndex() : this.store.currentIndex();
    for (const [k, v] of this.store.metaEntries()) if (!REPLACED_META.has(k) && !k.startsWith(TABLE_INDEX_PREFIX)) staged.putMeta(k, v);
    for (const t of TABLE_NAMES) {
      const moved = (this.changedIn.get(t) ?? 0) > 0 || (deletedIn.get(t) ?? 0) > 0 || (t === 'tokens' && this.localsDropped > 0);
      staged.putMeta(META.tableIndex(t), moved ? at : this.store.tableIndex(t));
    }
    const bootstrap = this.bootstrapChanged() ? this.bootstrap : this.store.getMeta(META.bootstrap);
    if (bootstrap) staged.putMeta(META.bootstrap, bootstrap);
    staged.putMeta(META.tableIndex('bootstrap'), this.bootstrapChanged() ? at : this.store.tableIndex('bootstrap'));
    staged.putMeta(META.index, Math.max(at, this.store.currentIndex()));
    staged.putMeta(META.cursor, cursor);
    // Another batch log for this datacenter's followers: they start over from a snapshot of it.
    const position = this.store.serverPosition();
    staged.putMeta(META.serverSeq, position.seq + 1);
    staged.putMeta(META.serverTerm, position.term);
    return {
      conflicts: this.conflicts,
      resolved: [],
      changed: changed + this.localsDropped,
      records: this.records,
      ...(this.replaced ? { rolledBack: [...this.replaced, ...this.removed(tables, staged, deletedIn)] } : {}),
    };
  }

  /** Global objects held here that the snapshot does not hold (read only where a table lost some). */
  private removed(tables: Tables, staged: StagedStore, deletedIn: ReadonlyMap<TableName, number>): RolledBack[] {
    const out: RolledBack[] = [];
    for (const t of TABLE_NAMES) {
      if ((deletedIn.get(t) ?? 0) <= 0) continue;
      const def = TABLE_DEFS[t];
      const held = tables[t].globalRecords() as RecordList<RecordTypes[typeof t]>;
      for (let start = 0; start < held.length; start += 10_000)
        for (const r of held.slice(start, start + 10_000)) {
          const id = def.id(r as never);
          if (!(staged.tables[t] as AnyTable).has(id) && modifiedAfter(r, this.changedAfter))
            out.push({ ...rolledBack(t, id, r), Deleted: true });
        }
    }
    return out;
  }

  /** A Local token of this datacenter into the staged store: it wins over a global token holding its ID or secret. */
  private async keepLocal(staged: StagedStore, tables: Tables, local: TokenRecord): Promise<void> {
    if (local.AuthMethod) {
      const place = local.AuthMethodNamespace ?? local.Namespace;
      const id = authMethodID(local.Partition, place, local.AuthMethod);
      const hadIt = tables.authMethods.get(id) as AuthMethodRecord | undefined;
      if (hadIt && !staged.tables.authMethods.get(id)) {
        // Its auth method is gone at the primary: the tokens it issued here go with it.
        this.localsDropped++;
        return;
      }
    }
    const rival = staged.tables.tokens.byUnique('secret', local.SecretID);
    if (rival && rival.AccessorID !== local.AccessorID) {
      this.conflicts.push({ AccessorID: rival.AccessorID, LocalAccessorID: local.AccessorID });
      await staged.deleteRecord('tokens', rival.AccessorID);
    }
    await staged.putRecord('tokens', local);
  }

  private bootstrapChanged(): boolean {
    if (!this.bootstrap) return false;
    const held = this.store.getMeta(META.bootstrap);
    return held === undefined || contentOf(held as object) !== contentOf(this.bootstrap);
  }
}

const modifiedAfter = (held: unknown, index: number): boolean => ((held as { ModifyIndex?: number }).ModifyIndex ?? 0) > index;

function rolledBack(table: TableName, id: string, held: unknown): RolledBack {
  const hash = (held as { Hash?: unknown }).Hash;
  return { Kind: AUDIT_KIND[table], ID: id, ...(typeof hash === 'string' ? { Hash: hash } : {}) };
}

/** Metadata the catch-up states anew (every table index too). */
const REPLACED_META = new Set<string>([META.index, META.cursor, META.bootstrap, META.serverSeq, META.serverTerm, META.probe]);
const TABLE_INDEX_PREFIX = META.tableIndex('tokens').slice(0, -'tokens'.length);

/** Global records of table `t` held here (every one but this datacenter's Local tokens and quotas). */
function globalCount(tables: Tables, t: TableName): number {
  const size = tables[t].size;
  if (t === 'tokens') return size - tables.tokens.memberCount('local', '');
  if (t === 'quotas') return [...tables.quotas.values()].filter((q) => !q.Local).length;
  return size;
}
