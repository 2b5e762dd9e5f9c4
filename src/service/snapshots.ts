import { actorOf, audited } from './audited.js';
import type { AuditActor } from '../observability/audit.js';
import { readFile } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import type { SnapshotRestoreResponse } from '../api/schemas.js';
import type { Clock } from '../domain/clock.js';
import { WatchwordError, invalid } from '../domain/errors.js';
import { generateID } from '../domain/ids.js';
import type { TokenRecord } from '../domain/types.js';
import { SnapshotError, type SnapshotContent, readSnapshot, snapshotStream } from '../store/snapshot.js';
import { type RecordTypes, TABLE_DEFS, TABLE_NAMES, type TableName } from '../store/schema.js';
import { checkGlobalObjects, checkTokens, withRecomputedHashes } from '../domain/snapshot-invariants.js';
import type { Store, Tx } from '../store/store.js';
import type { AclResolver, Identity } from './acl-resolver.js';
import type { RequestContext } from './context.js';

export interface SnapshotServiceOptions {
  datacenter: string;
  primaryDatacenter: string;
  isPrimary: boolean;
  /** Records an audit event that changes nothing in the store (a snapshot save). */
  audit?: (type: string, actor: AuditActor, details: Record<string, unknown>) => void;
}

/** The permission snapshots need (as Consul's: operator write), plus acl write since they hold every secret. */
function requireSnapshotRights(identity: Identity): void {
  const who = identity.anonymous ? 'anonymous token' : `token with AccessorID '${identity.token.AccessorID}'`;
  if (!identity.authorizer.canWrite('default', 'default'))
    throw new WatchwordError('PERMISSION_DENIED', `Permission denied: ${who} lacks permission 'acl:write'`);
  if (identity.authorizer.operatorAccess() !== 'write')
    throw new WatchwordError('PERMISSION_DENIED', `Permission denied: ${who} lacks permission 'operator:write'`);
}

/**
 * Backup and restore (README, "Configuration" (Backup and restore)). A snapshot is this datacenter's state at one index:
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
          primary: this.options.isPrimary,
          index: this.store.currentIndex(),
          logID: this.store.logID,
          tokens: [...snap.tokens, ...locals],
        },
        new Date(this.clock.now()),
      ),
    };
  }

  /** Whether the caller may restore: checked before the upload is read. */
  async authorizeRestore(ctx: RequestContext): Promise<void> {
    requireSnapshotRights(await this.resolver.resolve(ctx.secret, ctx.client));
  }

  /** Restores from an uploaded file (verified whole from the file before anything changes). */
  async restoreFile(ctx: RequestContext, path: string): Promise<SnapshotRestoreResponse> {
    return this.restore(ctx, await readFile(path));
  }

  async restore(ctx: RequestContext, file: Buffer): Promise<SnapshotRestoreResponse> {
    const identity = await this.resolver.resolve(ctx.secret, ctx.client);
    requireSnapshotRights(identity);
    let content: SnapshotContent;
    try {
      content = readSnapshot(file);
    } catch (err) {
      if (err instanceof SnapshotError) throw invalid(`Invalid snapshot: ${err.message}; nothing was restored`);
      throw err;
    }
    const own = content.header.Datacenter === this.options.datacenter;
    if (!this.options.isPrimary && !own) {
      throw invalid(
        `Invalid snapshot: it was taken in datacenter ${content.header.Datacenter}; a secondary restores only its own Local tokens (global objects come from the primary ${this.options.primaryDatacenter}); nothing was restored`,
      );
    }
    const restoreGlobal = this.options.isPrimary;
    const restoreLocal = own;
    // Every invariant the API enforces, checked before anything changes; every Hash recomputed.
    if (restoreGlobal) checkGlobalObjects(content);
    checkTokens(content.tokens.filter((t) => (t.Local ? restoreLocal : restoreGlobal)));
    content = withRecomputedHashes(content);
    let skipped = 0;
    const index = await this.store.transact(
      (tx) => {
        tx.nextIndex();
        // Deletes first, so a restored record may take over an ID or name they free.
        if (restoreGlobal) for (const t of TABLE_NAMES) deleteGlobalNotIn(tx, t, content[t]);
        if (restoreLocal) {
          const tokens = new Set(content.tokens.filter((t) => t.Local).map((t) => t.AccessorID));
          for (const t of tx.allRecords('tokens')) if (t.Local && !tokens.has(t.AccessorID)) tx.del('tokens', t.AccessorID);
        }
        if (restoreGlobal) {
          // In the table list's order: what tokens and rules link to first.
          for (const t of TABLE_NAMES) putGlobal(tx, t, content[t]);
          if (content.bootstrap) tx.putBootstrap(content.bootstrap);
        }
        if (restoreLocal) {
          for (const t of content.tokens) {
            if (!t.Local) continue;
            if (this.heldByGlobal(tx, t)) {
              skipped++;
              continue;
            }
            tx.put('tokens', t);
          }
        }
        if (restoreGlobal) tx.resetLog(generateID());
        return tx.index;
      },
      audited(ctx, identity, 'snapshot-restore', {
        Counts: countsOf(content),
      }),
    );
    const restored: SnapshotRestoreResponse['Restored'] = restoreGlobal && restoreLocal ? 'all' : restoreGlobal ? 'global' : 'local-tokens';
    const message =
      restored === 'all'
        ? 'global objects and Local tokens restored; secondaries resynchronise with the restored state'
        : restored === 'global'
          ? `global objects restored; the snapshot is of datacenter ${content.header.Datacenter}, so this datacenter's Local tokens were left as they were; secondaries resynchronise`
          : `this datacenter is a secondary: only its Local tokens were restored; global objects come from the primary ${this.options.primaryDatacenter}`;
    return {
      Restored: restored,
      Index: index,
      Tokens: content.tokens.filter((t) => (t.Local ? restoreLocal : restoreGlobal)).length - skipped,
      Policies: restoreGlobal ? content.policies.length : 0,
      Roles: restoreGlobal ? content.roles.length : 0,
      SkippedLocalTokens: skipped,
      Message: message,
    };
  }

  /** Whether a global token here already uses a Local token's AccessorID or SecretID. */
  private heldByGlobal(
    tx: { getToken(id: string): TokenRecord | undefined; getTokenBySecret(s: string): TokenRecord | undefined },
    t: TokenRecord,
  ): boolean {
    const byID = tx.getToken(t.AccessorID);
    const bySecret = tx.getTokenBySecret(t.SecretID);
    return (byID !== undefined && !byID.Local) || (bySecret !== undefined && !bySecret.Local && bySecret.AccessorID !== t.AccessorID);
  }
}

/** Records per table, as the audit line counts them. */
function countsOf(records: { readonly [T in TableName]: readonly unknown[] }): Record<TableName, number> {
  return Object.fromEntries(TABLE_NAMES.map((t) => [t, records[t].length])) as Record<TableName, number>;
}

/** Deletes the global records of table `t` (never a Local token) that `wanted` does not hold. */
function deleteGlobalNotIn<T extends TableName>(tx: Tx, t: T, wanted: readonly RecordTypes[T][]): void {
  const def = TABLE_DEFS[t];
  const keep = new Set(wanted.map((r) => def.id(r)));
  for (const r of tx.allRecords(t)) if (def.isGlobal(r) && !keep.has(def.id(r))) tx.del(t, def.id(r));
}

/** Writes the global records of `wanted` (Local tokens are restored on their own). */
function putGlobal<T extends TableName>(tx: Tx, t: T, wanted: readonly RecordTypes[T][]): void {
  const def = TABLE_DEFS[t];
  for (const r of wanted) if (def.isGlobal(r)) tx.put(t, r);
}
