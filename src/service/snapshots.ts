import { actorOf } from './audited.js';
import type { AuditActor } from '../observability/audit.js';
import type { Readable } from 'node:stream';
import type { SnapshotRestoreResponse } from '../api/schemas.js';
import type { Clock } from '../domain/clock.js';
import { WatchwordError, invalid } from '../domain/errors.js';
import { generateID } from '../domain/ids.js';
import type {
  AuthMethodRecord,
  BindingRuleRecord,
  BootstrapState,
  PolicyRecord,
  QuotaRecord,
  RoleRecord,
  TokenRecord,
} from '../domain/types.js';
import {
  SnapshotError,
  type SnapshotHeader,
  type SnapshotItem,
  readSnapshotFile,
  snapshotChecksumMatches,
  concatLists,
  snapshotStream,
} from '../store/snapshot.js';
import type { StagedStore } from '../store/staging.js';
import { META, TABLE_DEFS, TABLE_NAMES, type TableName } from '../store/schema.js';
import { RestoreChecks, type TokenLookup, recomputeHash } from '../domain/snapshot-invariants.js';
import type { Store } from '../store/store.js';
import type { AclResolver, Identity } from './acl-resolver.js';
import { deniedWithReason } from './permissions.js';
import { storedMethodCheck } from './auth-methods.js';
import { checkRule, checkSelectorText } from './binding-rules.js';
import { checkStoredQuota } from './quotas.js';
import type { Selectors } from '../auth/selectors.js';
import type { RequestContext } from './context.js';
import type { AuditType } from '../domain/audit-types.js';

export interface SnapshotServiceOptions {
  datacenter: string;
  /** The primary datacenter and whether it is this one, now (a promotion changes them). */
  primaryDatacenter: () => string;
  isPrimary: () => boolean;
  /** Binding rules' selectors are checked by it on writes: a restored rule's too. */
  selectors: Pick<Selectors, 'check'>;
  /** The limits auth methods are checked against on writes: a restored method is checked against them too. */
  methodLimits: Parameters<typeof storedMethodCheck>[0];
  /** Records an audit event that changes nothing in the store (a snapshot save). */
  audit?: (type: AuditType, actor: AuditActor, details: Record<string, unknown>) => void;
}

/** The permission snapshots need (as Consul's: operator write), plus acl write since they hold every secret. */
function requireSnapshotRights(identity: Identity): void {
  const who = identity.anonymous ? 'anonymous token' : `token with AccessorID '${identity.token.AccessorID}'`;
  if (!identity.authorizer.canWrite('default', 'default'))
    throw deniedWithReason(identity, `Permission denied: ${who} lacks permission 'acl:write'`, 'acl', '', 'write');
  if (identity.authorizer.operatorAccess() !== 'write')
    throw deniedWithReason(identity, `Permission denied: ${who} lacks permission 'operator:write'`, 'operator', '', 'write');
}

/**
 * Backup and restore (docs/configuration.md, "Configuration" (Backup and restore)). A snapshot is this datacenter's state at one index:
 * every global object and its Local tokens. The primary restores both (and starts a new
 * change log, so every secondary converges on the restored state); a secondary
 * restores only its Local tokens, since its global objects come from the primary.
 */
export class SnapshotService {
  constructor(
    private readonly store: Store,
    private readonly resolver: AclResolver,
    private readonly clock: Clock,
    private readonly options: SnapshotServiceOptions,
  ) {}

  async save(ctx: RequestContext): Promise<{ stream: Readable; index: number }> {
    const identity = await this.resolver.resolve(ctx.secret, ctx.client);
    requireSnapshotRights(identity);
    // Records are never changed in place: these references are a consistent view.
    const snap = this.store.snapshotGlobal();
    const locals = this.store.reader.localTokens();
    // This datacenter's Local quotas go with its Local tokens.
    const localQuotas = this.store.reader.listQuotas().filter((q) => q.Local);
    this.options.audit?.('snapshot-save', actorOf(ctx, identity), {
      Index: this.store.currentIndex(),
      Counts: { ...countsOf(snap), tokens: snap.tokens.length + locals.length },
    });
    return {
      index: this.store.currentIndex(),
      stream: snapshotStream(
        {
          ...snap,
          datacenter: this.options.datacenter,
          primary: this.options.isPrimary(),
          index: this.store.currentIndex(),
          logID: this.store.logID,
          tokens: concatLists(snap.tokens, locals),
          quotas: concatLists(snap.quotas, localQuotas),
          localTokens: locals.length,
        },
        new Date(this.clock.now()),
      ),
    };
  }

  /** Whether the caller may restore: checked before the upload is read. */
  async authorizeRestore(ctx: RequestContext): Promise<void> {
    requireSnapshotRights(await this.resolver.resolve(ctx.secret, ctx.client));
  }

  /**
   * Restores from an uploaded file, read as a stream into a staged store (store/staging.ts):
   * each record checked as the API would check it (domain/snapshot-invariants.ts) and staged,
   * the checksum and counts checked at the end; only then is the staged store made current, in
   * one step. Anything wrong gives the staging up: nothing changes. Memory holds the restored
   * state and one chunk of the file, whatever its size.
   */
  async restoreFile(ctx: RequestContext, path: string): Promise<SnapshotRestoreResponse> {
    const identity = await this.resolver.resolve(ctx.secret, ctx.client);
    requireSnapshotRights(identity);
    const staged = await this.store.stage();
    try {
      return await this.restoreInto(ctx, identity, staged, readSnapshotFile(path));
    } catch (err) {
      await staged.abandon();
      // A record met before the end was wrong: if the file is damaged, that is what to say.
      const notASnapshot = err instanceof SnapshotError && err.message.startsWith('not a watchword snapshot');
      const refused = (err instanceof SnapshotError && !notASnapshot) || (err instanceof WatchwordError && err.code === 'INVALID_REQUEST');
      if (refused && !(await snapshotChecksumMatches(path).catch(() => false)))
        throw invalid('Invalid snapshot: checksum mismatch: the file is damaged or truncated; nothing was restored');
      if (err instanceof SnapshotError) throw invalid(`Invalid snapshot: ${err.message}; nothing was restored`);
      throw err;
    }
  }

  private async restoreInto(
    ctx: RequestContext,
    identity: Identity,
    staged: StagedStore,
    items: AsyncGenerator<SnapshotItem, SnapshotHeader>,
  ): Promise<SnapshotRestoreResponse> {
    const first = await items.next();
    if (first.done || first.value.kind !== 'header') throw new SnapshotError('truncated: the header missing');
    const header = first.value.header;
    const own = header.Datacenter === this.options.datacenter;
    if (!this.options.isPrimary() && !own) {
      throw invalid(
        `Invalid snapshot: it was taken in datacenter ${header.Datacenter}; a secondary restores only its own Local tokens (global ` +
          `objects come from the primary ${this.options.primaryDatacenter()}); nothing was restored`,
      );
    }
    const scope: RestoreScope = { global: this.options.isPrimary(), local: own };
    const current = this.store.tables;
    const read = await this.stageFile(items, staged, scope);
    const tally = { skipped: 0, tokens: read.tokens };
    let index = 0;
    await this.store.install(staged, {
      logReset: scope.global,
      audit: { type: 'snapshot-restore', actor: actorOf(ctx, identity), details: { Counts: read.counts } },
      complete: async (s) => {
        s.endLoading();
        await keepOwn(s, current, scope, tally);
        index = this.restateMeta(s, scope, read.bootstrap);
      },
    });
    const restored: SnapshotRestoreResponse['Restored'] = scope.global && scope.local ? 'all' : scope.global ? 'global' : 'local-tokens';
    return {
      Restored: restored,
      Index: index,
      Tokens: tally.tokens,
      Policies: scope.global ? read.counts.policies : 0,
      Roles: scope.global ? read.counts.roles : 0,
      SkippedLocalTokens: tally.skipped,
      Message: this.restoredMessage(restored, header),
    };
  }

  /**
   * Reads the file's records into the staging, each checked as the API checks it and stamped with
   * one new index; then the checksum, the end frame and the header's counts: the file is whole
   * before anything changes.
   */
  private async stageFile(
    items: AsyncGenerator<SnapshotItem, SnapshotHeader>,
    staged: StagedStore,
    scope: RestoreScope,
  ): Promise<{ counts: Record<TableName, number>; bootstrap: BootstrapState | null; tokens: number }> {
    // Checked by the functions the API checks them with.
    const checks = new RestoreChecks({
      authMethod: await storedMethodCheck(this.options.methodLimits),
      bindingRule: (rule, method) => checkRule(method, rule),
    });
    const current = this.store.tables;
    const tokens = staged.tables.tokens;
    const held = {
      byAccessor: (id: string) => tokens.get(id),
      bySecret: (s: string) => tokens.byUnique('secret', s),
      byPreviousSecret: (s: string) => tokens.byUnique('previousSecret', s),
    };
    // The index the restored records are stamped with (writes made meanwhile take later ones).
    const stampIndex = this.store.allocateIndex();
    const counts = Object.fromEntries(TABLE_NAMES.map((t) => [t, 0])) as Record<TableName, number>;
    let bootstrap: BootstrapState | null = null;
    let restoredTokens = 0;
    /** Each binding rule's selector, its patterns checked once the file is read. */
    const selectors: Array<[string, string]> = [];
    for (let item = await items.next(); !item.done; item = await items.next()) {
      const v = item.value;
      if (v.kind === 'header') continue;
      if (v.kind === 'bootstrap') {
        bootstrap = v.bootstrap;
        continue;
      }
      const { T: table, V: record } = v.record;
      counts[table]++;
      const local = !TABLE_DEFS[table].isGlobal(record as never);
      if (local ? !scope.local : !scope.global) continue;
      checkRecord(checks, table, record, held);
      if (table === 'bindingRules') selectors.push([(record as BindingRuleRecord).ID, (record as BindingRuleRecord).Selector]);
      recomputeHash(table, record);
      const was = (current[table] as { get(id: string): { CreateIndex: number } | undefined }).get(TABLE_DEFS[table].id(record as never));
      const r = record as { CreateIndex: number; ModifyIndex: number };
      r.CreateIndex = was?.CreateIndex ?? stampIndex;
      r.ModifyIndex = stampIndex;
      await staged.putRecord(table, record as never);
      if (table === 'tokens') restoredTokens++;
    }
    const end = await items.next();
    if (!end.done) throw new SnapshotError('bytes after the end of the snapshot');
    checks.finish(scope.global);
    for (const [id, selector] of selectors)
      await checkSelectorText(this.options.selectors, selector).catch((err: unknown) => {
        throw err instanceof WatchwordError ? invalid(`Invalid snapshot: binding rule ${id}: ${err.message}; nothing was restored`) : err;
      });
    return { counts, bootstrap, tokens: restoredTokens };
  }

  /** The metadata of the installed store: new indexes, this datacenter's own entries kept; returns the restore's index. */
  private restateMeta(s: StagedStore, scope: RestoreScope, bootstrap: BootstrapState | null): number {
    const index = this.store.allocateIndex();
    for (const [k, v] of this.store.metaEntries()) {
      if (REPLACED_META.has(k) || k.startsWith(TABLE_INDEX_PREFIX)) continue;
      if (scope.global && (k === META.logID || k === META.logTrimmed)) continue;
      s.putMeta(k, v);
    }
    for (const t of TABLE_NAMES) s.putMeta(META.tableIndex(t), scope.global || t === 'tokens' ? index : this.store.tableIndex(t));
    const keptBootstrap = scope.global && bootstrap ? bootstrap : this.store.getMeta(META.bootstrap);
    if (keptBootstrap) s.putMeta(META.bootstrap, keptBootstrap);
    s.putMeta(META.tableIndex('bootstrap'), scope.global && bootstrap ? index : this.store.tableIndex('bootstrap'));
    s.putMeta(META.index, index);
    // The primary starts a new change log: every secondary converges on the restored state from a snapshot.
    if (scope.global) s.putMeta(META.logID, generateID());
    const position = this.store.serverPosition();
    s.putMeta(META.serverSeq, position.seq + 1);
    s.putMeta(META.serverTerm, position.term);
    return index;
  }

  private restoredMessage(restored: SnapshotRestoreResponse['Restored'], header: SnapshotHeader): string {
    if (restored === 'all') return 'global objects and Local tokens restored; secondaries resynchronise with the restored state';
    if (restored === 'global')
      return (
        `global objects restored; the snapshot is of datacenter ${header.Datacenter}, so this datacenter's Local tokens were left ` +
        `as they were; secondaries resynchronise`
      );
    return (
      `this datacenter is a secondary: only its Local tokens were restored; global objects come from the primary ` +
      `${this.options.primaryDatacenter()}`
    );
  }
}

/** What a restore takes from the file: global objects (on the primary), Local tokens (when the file is this datacenter's). */
interface RestoreScope {
  global: boolean;
  local: boolean;
}

/**
 * What this datacenter keeps of its own: its Local tokens (restoring global objects only),
 * or its global objects (a secondary restoring its Local tokens). A token of the file wins.
 */
async function keepOwn(
  s: StagedStore,
  current: Store['tables'],
  scope: RestoreScope,
  tally: { skipped: number; tokens: number },
): Promise<void> {
  if (!scope.local) {
    for (const t of [...(current.tokens.members('local', '') ?? [])]) {
      if (s.tables.tokens.get(t.AccessorID) || s.tables.tokens.byUnique('secret', t.SecretID)) tally.skipped++;
      else await s.putRecord('tokens', t);
    }
    for (const q of current.quotas.values()) if (q.Local && !s.tables.quotas.get(q.ID)) await s.putRecord('quotas', q);
  }
  if (scope.global) return;
  for (const table of TABLE_NAMES) {
    for (const r of current[table].values()) {
      if (!TABLE_DEFS[table].isGlobal(r as never)) continue;
      if (table === 'tokens') {
        // A Local token of the file whose ID or secret a global token holds is not restored.
        const g = r as TokenRecord;
        for (const rival of [s.tables.tokens.get(g.AccessorID), s.tables.tokens.byUnique('secret', g.SecretID)]) {
          if (rival?.Local && s.tables.tokens.get(rival.AccessorID)) {
            await s.deleteRecord('tokens', rival.AccessorID);
            tally.skipped++;
            tally.tokens--;
          }
        }
      }
      await s.putRecord(table, r as never);
    }
  }
}

/** Metadata a restore states anew (every table index too). */
const REPLACED_META = new Set<string>([META.index, META.bootstrap, META.serverSeq, META.serverTerm, META.probe]);
const TABLE_INDEX_PREFIX = META.tableIndex('tokens').slice(0, -'tokens'.length);

/** The checks of one record of the file, by its table. */
function checkRecord(checks: RestoreChecks, table: TableName, record: unknown, held: TokenLookup): void {
  if (table === 'tokens') checks.token(record as TokenRecord, held);
  else if (table === 'policies') checks.policy(record as PolicyRecord);
  else if (table === 'roles') checks.role(record as RoleRecord);
  else if (table === 'authMethods') checks.authMethod(record as AuthMethodRecord);
  else if (table === 'quotas') checkStoredQuota(record as QuotaRecord);
  else checks.bindingRule(record as BindingRuleRecord);
}

/** Records per table, as the audit line counts them. */
function countsOf(records: { readonly [T in TableName]: { readonly length: number } }): Record<TableName, number> {
  return Object.fromEntries(TABLE_NAMES.map((t) => [t, records[t].length])) as Record<TableName, number>;
}
