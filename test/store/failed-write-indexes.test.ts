import { afterEach, describe, expect, it } from 'vitest';
import { LevelStore } from '../../src/store/level-store.js';
import { tokenRecord } from '../helpers/records.js';
import { recordingReplicator } from '../helpers/replicator.js';
import { tempDir } from '../helpers/temp-dir.js';

// An HA leader sends each batch to its followers while writing it; when its own write fails,
// a follower may hold the batch. Its indexes must never name other writes afterwards, or a
// follower's "I have reached index N" would be true of writes it does not hold.

describe('a write that fails on the disk', () => {
  let cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanup.reverse()) await c();
    cleanup = [];
  });

  it('gives its indexes to nobody else once the disk takes writes again', async () => {
    const dir = await tempDir();
    let broken = false;
    const store = await LevelStore.open(dir.path, {
      durability: 'fsync',
      changeLog: true,
      faults: { writeError: () => (broken ? new Error('IO error: No space left on device') : undefined) },
    });
    cleanup.push(
      () => dir.remove(),
      () => store.close(),
    );
    store.setReplicator(recordingReplicator(1));
    await store.transact((tx) => tx.put('tokens', tokenRecord()));
    const before = store.currentIndex();
    broken = true;
    const refused = tokenRecord();
    let refusedIndex = 0;
    await expect(
      store.transact((tx) => {
        tx.put('tokens', refused);
        refusedIndex = tx.index;
      }),
    ).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    expect(refusedIndex).toBeGreaterThan(before);
    broken = false;
    const later = tokenRecord();
    for (let tries = 0; ; tries++) {
      try {
        await store.transact((tx) => tx.put('tokens', later));
        break;
      } catch (err) {
        if (tries > 100) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    expect(store.reader.getToken(refused.AccessorID)).toBeUndefined();
    expect(store.reader.getToken(later.AccessorID)?.CreateIndex).toBeGreaterThan(refusedIndex);
  });
});
