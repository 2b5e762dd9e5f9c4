import type { BootstrapState, TokenRecord } from '../domain/types.js';
import { isExpired } from '../domain/expiry.js';
import { type DecodedPair, type LoadedState, WATCH_TABLES } from './disk-format.js';
import { type Tables, newTables } from './memory.js';
import type { AnyTable } from './table.js';
import { GoneSecrets } from './gone-secrets.js';
import { LastUseBook } from './last-use.js';
import { META, createdHour } from './schema.js';
import type { ChangedRecords, LogEntry, WatchTable } from './store.js';
import type { TableOp } from './store-tx.js';

const ZERO_BOOTSTRAP: BootstrapState = { Bootstrapped: false, ResetIndex: 0 };
/** The fields of a token deleted unread that `write` reads (`unreadAnswer`). */
const ANSWER_LIVE: ReadonlyArray<keyof TokenRecord & string> = ['SecretID', 'CreateTime'];
const ANSWER_USED: ReadonlyArray<keyof TokenRecord & string> = ['CreateTime'];
const ANSWER_NONE: ReadonlyArray<keyof TokenRecord & string> = [];

/** What a durable commit changes in memory. */
export interface CommittedChange {
  tableOps: readonly TableOp[];
  meta: ReadonlyArray<[string, unknown]>;
  index: number;
  tables: ReadonlyMap<WatchTable, number>;
  entries: readonly LogEntry[];
  /** A change log this commit starts (restore). */
  newLogID?: string;
  /** Last uses this commit wrote (a flush). */
  lastUses?: ReadonlyArray<readonly [string, number]>;
}

/** What applying changes did, for the watchers. */
export interface Applied {
  /** The index before. */
  from: number;
  /** Each table the changes touched, with its index now. */
  tables: Map<WatchTable, number>;
  entries: LogEntry[];
  /** The changes started a new change log. */
  logReset: boolean;
  /** HA: not confirmed by the synchronous followers (see CommitEvent). */
  unconfirmed?: boolean;
  /** Which records the changes wrote (see CommitEvent); absent when everything may have changed. */
  changed?: ChangedRecords;
}

/**
 * The durable state in memory (as etcd keeps an in-memory index over its backend): every
 * record with its indexes, the metadata, the index and each table's index, the change-log
 * identity and the HA batch position. It changes only once a write is on disk; readers
 * and transactions read it without touching the disk. Indexes never move backward, except
 * when a follower takes its leader's whole batch log.
 */
export class CommittedState {
  tables: Tables = newTables();
  readonly meta = new Map<string, unknown>();
  private readonly tableIndexes = new Map<WatchTable, number>();
  /** The highest durable index. */
  index = 0;
  logID: string;
  /** Change-log entries up to here were trimmed. */
  trimmedUpTo = 0;
  /** HA: the last durable batch. */
  seq = 0;
  term = 0;
  /** Secrets of tokens deleted here a moment ago (gone-secrets.ts). */
  readonly goneSecrets = new GoneSecrets();
  /** Each token's last use known here: flushed, and seen since (last-use.ts). */
  lastUse = new LastUseBook();
  /** Tokens deleted from this state, by any path (a reap, a delete, a logout, a replicated change). */
  tokensDeleted = 0;

  constructor(logID: string) {
    this.logID = logID;
    this.lastUse.madeHourOf = this.madeHourOf;
  }

  /** The hour a token held was made, as its `created` index key (the book of uses counts used tokens by it). */
  private readonly madeHourOf = (accessor: string): string | undefined => {
    const t = this.tables.tokens.peek(accessor);
    return t === undefined ? undefined : createdHour(t.CreateTime);
  };

  tableIndex(table: WatchTable): number {
    return this.tableIndexes.get(table) ?? 0;
  }

  bootstrap(): BootstrapState {
    return (this.meta.get(META.bootstrap) as BootstrapState | undefined) ?? ZERO_BOOTSTRAP;
  }

  /** Takes what the disk holds (at open, after a recovery that finds more on disk, after a follower's snapshot). */
  adopt(disk: LoadedState, options: { indexesMayGoBack?: boolean } = {}): void {
    if (options.indexesMayGoBack) {
      this.index = 0;
      this.tableIndexes.clear();
    }
    this.meta.clear();
    for (const [k, v] of disk.meta) this.meta.set(k, v);
    const num = (k: string): number => Number(this.meta.get(k) ?? 0);
    this.index = Math.max(this.index, num(META.index));
    this.trimmedUpTo = num(META.logTrimmed);
    this.seq = num(META.serverSeq);
    this.term = num(META.serverTerm);
    const logID = this.meta.get(META.logID);
    if (typeof logID === 'string') this.logID = logID;
    for (const t of WATCH_TABLES) this.tableIndexes.set(t, Math.max(this.tableIndex(t), num(META.tableIndex(t))));
    this.tables = disk.tables;
    // Uses this server knows of and the disk does not (seen since the last flush, or a store replaced): kept, to be flushed.
    disk.lastUse.keepNewer(this.lastUse);
    this.lastUse = disk.lastUse;
    this.lastUse.madeHourOf = this.madeHourOf;
  }

  /** A durable group of commits, in order. */
  applyCommits(group: readonly CommittedChange[]): Applied {
    const from = this.index;
    const tables = new Map<WatchTable, number>();
    const changed: ChangedRecords = { tokens: [], policies: [], roles: [] };
    let entries: LogEntry[] = [];
    let logReset = false;
    for (const c of group) {
      if (c.newLogID !== undefined) {
        this.logID = c.newLogID;
        entries = [];
        logReset = true;
      }
      for (const op of c.tableOps) this.write(op.table, op.id, op.record, op.bytes, op.old, changed, op.reaped);
      for (const [k, v] of c.meta) this.meta.set(k, v);
      if (c.lastUses) for (const [id, ms] of c.lastUses) this.lastUse.adopt(id, ms);
      this.index = Math.max(this.index, c.index);
      for (const [t, idx] of c.tables) {
        this.tableIndexes.set(t, Math.max(this.tableIndex(t), idx));
        tables.set(t, this.tableIndex(t));
      }
      entries.push(...c.entries);
    }
    return { from, tables, entries, logReset, changed };
  }

  /** A follower's batch from its leader, as decoded key/value pairs. */
  applyPairs(decoded: readonly DecodedPair[]): Applied {
    const from = this.index;
    const tables = new Map<WatchTable, number>();
    const changed: ChangedRecords = { tokens: [], policies: [], roles: [] };
    for (const d of decoded) {
      if (d.kind === 'record') {
        this.write(d.table, d.id, d.record, d.bytes, undefined, changed);
      } else if (d.kind === 'lastUse') {
        if (d.ms === null) this.lastUse.forget(d.id);
        else this.lastUse.adopt(d.id, d.ms);
      } else if (d.kind === 'meta') {
        if (d.value === undefined) this.meta.delete(d.key);
        else this.meta.set(d.key, d.value);
        if (d.key === META.index) this.index = Number(d.value ?? 0);
        else if (d.key === META.logID && typeof d.value === 'string') this.logID = d.value;
        else if (d.key === META.logTrimmed) this.trimmedUpTo = Number(d.value ?? 0);
        else if (d.table !== undefined) {
          const idx = Number(d.value ?? 0);
          this.tableIndexes.set(d.table, idx);
          tables.set(d.table, idx);
        }
      }
    }
    return { from, tables, entries: [], logReset: false, changed };
  }

  /**
   * One record written (null: deleted); a token's secret that no token holds any more is noted
   * as gone, unless the token had expired (`reaped`, its expiry: the reaper deleted it for that): every server
   * refuses an expired token from its ExpirationTime on, and a reap of millions would push the
   * revocations that matter out of the note.
   */
  private write(
    table: TableOp['table'],
    id: string,
    record: unknown,
    bytes: Uint8Array | undefined,
    known: unknown,
    changed: ChangedRecords,
    reaped?: number,
  ): void {
    const t = this.tables[table] as AnyTable;
    // A delete whose record the caller did not read: the old version's indexed fields come from its bytes.
    const old =
      record !== null
        ? t.put(record, bytes !== undefined ? { bytes } : undefined)
        : known !== undefined
          ? t.delete(id, known)
          : t.deleteUnread(id, table !== 'tokens' ? undefined : this.unreadAnswer(id, reaped !== undefined), reaped);
    if (table === 'policies' || table === 'roles') changed[table].push(id);
    if (table !== 'tokens') return;
    changed.tokens.push(id);
    const token = record as TokenRecord | null;
    const was = old as Partial<TokenRecord> | undefined;
    // Before a deleted token's use is forgotten: the book counts the used tokens by the hour they were made.
    this.lastUse.tokenMade(id, was?.CreateTime, token?.CreateTime);
    if (token === null) {
      this.lastUse.forget(id);
      if (was !== undefined) this.tokensDeleted++;
    }
    const before = was?.SecretID;
    const after = token?.SecretID;
    // A rotation's replaced secret still authenticates for its overlap: not gone.
    const ended = token === null && was !== undefined && (reaped !== undefined || isExpired(was, Date.now()));
    if (before !== undefined && before !== after && before !== token?.PreviousSecretID && !ended) this.goneSecrets.add(before);
    if (after !== undefined) this.goneSecrets.forget(after);
  }

  /**
   * What `write` reads of a token deleted unread: its secret, to note it gone, unless it was
   * reaped for its expiry; its creation time when its use is counted (by the hour it was made).
   */
  private unreadAnswer(id: string, reaped: boolean): ReadonlyArray<keyof TokenRecord & string> {
    if (!reaped) return ANSWER_LIVE;
    return this.lastUse.get(id) === undefined ? ANSWER_NONE : ANSWER_USED;
  }

  /** Every watched table with its index (a batch log replaced: every waiter looks again). */
  allTables(): Map<WatchTable, number> {
    return new Map(WATCH_TABLES.map((t) => [t, this.tableIndex(t)]));
  }
}
