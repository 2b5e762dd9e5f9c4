import { readFile } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import type { SnapshotRestoreResponse } from '../api/schemas.js';
import type { Clock } from '../domain/clock.js';
import { WatchwordError, invalid } from '../domain/errors.js';
import { generateID } from '../domain/ids.js';
import type { TokenRecord } from '../domain/types.js';
import { SnapshotError, type SnapshotContent, readSnapshot, snapshotStream } from '../store/snapshot.js';
import { authMethodID } from '../store/schema.js';
import { checkGlobalObjects, checkTokens, withRecomputedHashes } from '../domain/snapshot-invariants.js';
import type { Store } from '../store/store.js';
import type { AclResolver, Identity } from './acl-resolver.js';
import type { RequestContext } from './context.js';


export interface SnapshotServiceOptions {
  datacenter: string;
  primaryDatacenter: string;
  isPrimary: boolean;
}

/** The permission snapshots need (as Consul's: operator write), plus acl write since they hold every secret. */
function requireSnapshotRights(identity: Identity): void {
  const who = identity.anonymous ? 'anonymous token' : `token with AccessorID '${identity.token.AccessorID}'`;
  if (!identity.authorizer.canWrite('default', 'default')) throw new WatchwordError('PERMISSION_DENIED', `Permission denied: ${who} lacks permission 'acl:write'`);
  if (identity.authorizer.operatorAccess() !== 'write') throw new WatchwordError('PERMISSION_DENIED', `Permission denied: ${who} lacks permission 'operator:write'`);
}

/**
 * Backup and restore (SPEC §12). A snapshot is this datacenter's state at one index:
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
    requireSnapshotRights(await this.resolver.resolve(ctx.secret, ctx.client));
    // Records are never changed in place: these references are a consistent view.
    const snap = this.store.snapshotGlobal();
    const locals = this.store.reader.localTokens();
    return {
      index: this.store.currentIndex(),
      stream: snapshotStream(
        {
          datacenter: this.options.datacenter,
          primary: this.options.isPrimary,
          index: this.store.currentIndex(),
          logID: this.store.logID,
          tokens: [...snap.tokens, ...locals],
          policies: snap.policies,
          roles: snap.roles,
          authMethods: snap.authMethods,
          bindingRules: snap.bindingRules,
          bootstrap: snap.bootstrap,
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
    requireSnapshotRights(await this.resolver.resolve(ctx.secret, ctx.client));
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
    const index = await this.store.transact((tx) => {
      tx.nextIndex();
      // Deletes first, so a restored record may take over an ID or name they free.
      if (restoreGlobal) {
        const keep = (ids: Iterable<string>) => new Set(ids);
        const policies = keep(content.policies.map((p) => p.ID));
        const roles = keep(content.roles.map((x) => x.ID));
        const tokens = keep(content.tokens.filter((t) => !t.Local).map((t) => t.AccessorID));
        for (const p of tx.allRecords('policies')) if (!policies.has(p.ID)) tx.deletePolicy(p.ID);
        for (const x of tx.allRecords('roles')) if (!roles.has(x.ID)) tx.deleteRole(x.ID);
        const methods = keep(content.authMethods.map((m) => authMethodID(m.Partition, m.Namespace, m.Name)));
        const rules = keep(content.bindingRules.map((r) => r.ID));
        for (const m of tx.allRecords('authMethods')) {
          const id = authMethodID(m.Partition, m.Namespace, m.Name);
          if (!methods.has(id)) tx.deleteAuthMethod(id);
        }
        for (const r of tx.allRecords('bindingRules')) if (!rules.has(r.ID)) tx.deleteBindingRule(r.ID);
        for (const t of tx.allRecords('tokens')) if (!t.Local && !tokens.has(t.AccessorID)) tx.deleteToken(t.AccessorID);
      }
      if (restoreLocal) {
        const tokens = new Set(content.tokens.filter((t) => t.Local).map((t) => t.AccessorID));
        for (const t of tx.allRecords('tokens')) if (t.Local && !tokens.has(t.AccessorID)) tx.deleteToken(t.AccessorID);
      }
      if (restoreGlobal) {
        for (const p of content.policies) tx.putPolicy(p);
        for (const x of content.roles) tx.putRole(x);
        for (const m of content.authMethods) tx.putAuthMethod(m);
        for (const r of content.bindingRules) tx.putBindingRule(r);
        for (const t of content.tokens) if (!t.Local) tx.putToken(t);
        if (content.bootstrap) tx.putBootstrap(content.bootstrap);
      }
      if (restoreLocal) {
        for (const t of content.tokens) {
          if (!t.Local) continue;
          if (this.heldByGlobal(tx, t)) {
            skipped++;
            continue;
          }
          tx.putToken(t);
        }
      }
      if (restoreGlobal) tx.resetLog(generateID());
      return tx.index;
    });
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
  private heldByGlobal(tx: { getToken(id: string): TokenRecord | undefined; getTokenBySecret(s: string): TokenRecord | undefined }, t: TokenRecord): boolean {
    const byID = tx.getToken(t.AccessorID);
    const bySecret = tx.getTokenBySecret(t.SecretID);
    return (byID !== undefined && !byID.Local) || (bySecret !== undefined && !bySecret.Local && bySecret.AccessorID !== t.AccessorID);
  }
}
