import { rm, statfs, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LevelStore } from '../../src/store/level-store.js';
import { tokenRecord } from '../helpers/records.js';
import { recordingReplicator } from '../helpers/replicator.js';
import { tempDir } from '../helpers/temp-dir.js';
import { mountTmpfs } from '../helpers/tmpfs.js';

// A follower applies its leader's batches outside the group commit. When its disk fills, a
// batch fails; once space is freed it must not go on writing through the same LevelDB: the
// log writer's blocks no longer match its file, and what it appends after (synced, and
// confirmed to the leader, which counts on it) cannot be read back at the next open.

const isRoot = process.getuid?.() === 0;

describe('a follower whose disk fills', () => {
  it.skipIf(!isRoot)(
    'keeps every batch it confirmed after the disk frees, across a restart (tmpfs, needs root)',
    async () => {
      const disk = await mountTmpfs('16m');
      if (!disk) return;
      const mount = disk.path;
      const leaderDir = await tempDir();
      const leader = await LevelStore.open(leaderDir.path, { durability: 'fsync', changeLog: true });
      const replicator = recordingReplicator(1);
      const batches = replicator.batches;
      leader.setReplicator(replicator);
      let follower = await LevelStore.open(join(mount, 'store'), { durability: 'fsync', changeLog: true });
      follower.setFollower(true);
      const filler = join(mount, 'filler');
      const confirmed: string[] = [];
      let failures = 0;
      // Applies the leader's batches in order, as the stream does; true once all are applied.
      const catchUp = async (): Promise<boolean> => {
        for (const b of batches.filter((x) => x.seq > follower.serverPosition().seq)) {
          try {
            await follower.applyServerBatches([b]);
            follower.commitServerBatches(b.seq);
          } catch (err) {
            failures++;
            expect((err as { code?: string }).code).toBe('STORE_UNAVAILABLE');
            return false;
          }
        }
        return true;
      };
      const write = async (n: number, tag: string): Promise<string[]> => {
        const ids: string[] = [];
        for (let i = 0; i < n; i++) {
          const t = tokenRecord({ Description: `${tag} ${i} ${'x'.repeat(400)}` });
          await leader.transact((tx) => tx.put('tokens', t));
          ids.push(t.AccessorID);
        }
        return ids;
      };
      try {
        const before = await write(20, 'before');
        expect(await catchUp()).toBe(true);
        confirmed.push(...before);
        const { bavail, bsize } = await statfs(mount);
        await writeFile(filler, Buffer.alloc(Math.max(0, bavail * bsize - 256 * 1024))).catch((err: NodeJS.ErrnoException) => {
          if (err.code !== 'ENOSPC') throw err;
        });
        // Batches until one fails on the full disk.
        for (let round = 0; round < 200 && failures === 0; round++) {
          const ids = await write(10, `filling ${round}`);
          if (await catchUp()) confirmed.push(...ids);
        }
        expect(failures).toBeGreaterThan(0);
        await rm(filler);
        // The disk has room again: the follower catches up (once it has reopened its database) and confirms more.
        const after = await write(400, 'after');
        const deadline = Date.now() + 20_000;
        while (!(await catchUp())) {
          if (Date.now() > deadline) throw new Error('the follower did not take batches again within 20 s');
          await new Promise((r) => setTimeout(r, 100));
        }
        confirmed.push(...after);
        for (const id of confirmed) expect(follower.reader.getToken(id)).toBeDefined();
        // What it confirmed is on its disk: a restart reads it all back.
        await follower.close();
        follower = await LevelStore.open(join(mount, 'store'), { durability: 'fsync', changeLog: true });
        const missing = confirmed.filter((id) => follower.reader.getToken(id) === undefined);
        expect({ confirmed: confirmed.length, missing: missing.length }).toEqual({ confirmed: confirmed.length, missing: 0 });
      } finally {
        await follower.close().catch(() => undefined);
        await leader.close();
        await leaderDir.remove();
        await disk.remove();
      }
    },
    90_000,
  );
});
