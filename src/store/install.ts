import { WatchwordError } from '../domain/errors.js';
import { installAuditEvent } from './audit-events.js';
import { StagedStore, settleStagedStore, swapInStagedStore } from './staging.js';
import type { LoadedState } from './disk-format.js';
import type { GroupCommitter } from './group-commit.js';
import type { AuditSink, InstallOptions } from './store.js';
import type { WriteRecovery } from './write-recovery.js';

/** What making a staged store current reads of the store (held by reference: the store's core). */
export interface SwitchHost {
  /** The store's directory (the staged one is swapped in there). */
  readonly dir: string;
  readonly db: { close(): Promise<void> };
  readonly committer: Pick<GroupCommitter, 'drain'>;
  /** Throws while the store recovers from a write error, or once closed. */
  readonly recovery: Pick<WriteRecovery, 'checkWritable'>;
  readonly auditSink: AuditSink | undefined;
  readonly state: { readonly index: number };
  /** Opens the database in the directory (after a swap) as the store's. */
  openDb(): Promise<void>;
  /** The staged store's tables and metadata become the durable state; readers and waiters told. */
  adopt(staged: LoadedState, options: { indexesMayGoBack: boolean; swapped: { logReset: boolean } }): void;
  /** Reads the state again from disk (a swap that failed with the database closed). */
  reload(options: { indexesMayGoBack: boolean }): Promise<unknown>;
}

/**
 * A whole new state written beside the store (store/staging.ts) and made current in one step
 * (a secondary's catch-up, an HA follower's snapshot, a restore): one staging at a time, and
 * transactions wait while the switch is made.
 */
export class StoreSwitch {
  /** The staging started last (until it is made current or given up, its directory is in use). */
  private staging: StagedStore | undefined;
  /** Set while a staged store is made current: transactions wait for it. */
  installing: Promise<void> | undefined;

  constructor(private readonly store: SwitchHost) {}

  /** Starts a staged store: the current state serves until `install` makes it current. */
  async stage(): Promise<StagedStore> {
    this.store.recovery.checkWritable();
    // One staging at a time: another one under way (a catch-up, while a restore is asked for) is not cut short.
    if (this.staging?.active)
      throw new WatchwordError(
        'CONFLICT',
        'another change of the whole store (a catch-up from the primary, a snapshot from the leader, or a restore) is under way; ' +
          'try again once it has ended',
      );
    // One given up (a lost connection's) may still be removing its directory.
    await this.staging?.abandon();
    this.staging = await StagedStore.create(this.store.dir);
    return this.staging;
  }

  /**
   * Makes a staged store current in one step. Transactions wait meanwhile, and those accepted
   * before are written first; `complete` then adds what must be current at the switch (it runs
   * with writes held); the staging is finished, its directory swapped in, and its tables become
   * the durable state. `indexesMayGoBack`: the staged store is another batch log (a follower's
   * leader), whose indexes this one follows even backward.
   */
  async install(staged: StagedStore, options: InstallOptions = {}): Promise<void> {
    const store = this.store;
    let release = (): void => undefined;
    this.installing = new Promise<void>((resolve) => {
      release = resolve;
    });
    let closed = false;
    try {
      await store.committer.drain();
      store.recovery.checkWritable();
      await options.complete?.(staged);
      const sink = store.auditSink;
      const event = options.audit && sink ? installAuditEvent(options.audit, staged, store.state.index) : undefined;
      // Enforced auditing: the line is durable before the switch, or there is no switch.
      if (event && sink?.mode === 'enforced') await sink.writeGroup([event]);
      await staged.finish();
      closed = true;
      await store.db.close();
      await swapInStagedStore(store.dir);
      await store.openDb();
      closed = false;
      store.adopt(staged, { indexesMayGoBack: options.indexesMayGoBack === true, swapped: { logReset: options.logReset === true } });
      if (event && sink?.mode === 'best-effort') void sink.writeGroup([event]);
    } catch (err) {
      await staged.abandon().catch(() => undefined);
      // The swap failed with the database closed: the directory in place (old or new) is opened again.
      if (closed) {
        await settleStagedStore(store.dir).catch(() => undefined);
        await store.openDb();
        await store.reload({ indexesMayGoBack: true });
      }
      throw err;
    } finally {
      this.installing = undefined;
      release();
    }
  }
}
