import type { CommitEvent, WatchTable } from './store.js';

/**
 * Who waits on the store (as etcd's watchable store keeps watchers apart from the backend):
 * blocking queries waiting for a table's index to pass a value, and listeners told of
 * every durable commit (replication, metrics). Woken only once a change is durable.
 */
export class Watchers {
  private readonly waiters = new Map<WatchTable, Set<{ index: number; wake: () => void }>>();
  private readonly listeners = new Set<(event: CommitEvent) => void>();

  constructor(private readonly tableIndex: (table: WatchTable) => number) {}

  /** Resolves once `table`'s index exceeds `index`, or `signal` aborts. */
  wait(table: WatchTable, index: number, signal?: AbortSignal): Promise<void> {
    if (this.tableIndex(table) > index || signal?.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      let set = this.waiters.get(table);
      if (!set) this.waiters.set(table, (set = new Set()));
      const waiter = {
        index,
        wake: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = (): void => {
        set.delete(waiter);
        resolve();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      set.add(waiter);
    });
  }

  /** Wakes the waiters each table's new index has passed. */
  wake(tables: ReadonlyMap<WatchTable, number>): void {
    for (const [table, idx] of tables) {
      const set = this.waiters.get(table);
      if (!set) continue;
      for (const w of set) {
        if (idx > w.index) {
          set.delete(w);
          w.wake();
        }
      }
    }
  }

  /** Wakes every waiter of `table` (its batch log was replaced), or of every table. */
  wakeAll(table?: WatchTable): void {
    for (const [t, set] of this.waiters) {
      if (table !== undefined && t !== table) continue;
      for (const w of set) w.wake();
      set.clear();
    }
  }

  /** Number of blocked waiters (metrics). */
  count(): number {
    let n = 0;
    for (const s of this.waiters.values()) n += s.size;
    return n;
  }

  onCommit(listener: (event: CommitEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  get listening(): boolean {
    return this.listeners.size > 0;
  }

  emit(event: CommitEvent): void {
    for (const l of this.listeners) l(event);
  }
}
