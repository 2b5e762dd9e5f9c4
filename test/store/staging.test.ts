import { mkdir, readdir, stat, writeFile } from 'node:fs/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LevelStore } from '../../src/store/level-store.js';
import { StagedStore, settleStagedStore, stagingDir } from '../../src/store/staging.js';
import { tokenRecord } from '../helpers/records.js';
import { tempDir } from '../helpers/temp-dir.js';

// A whole new store written beside the current one and made current in one step (store/staging.ts):
// the current state serves until the switch, and a crash at any moment leaves a whole store.

const open = (path: string) => LevelStore.open(path, { durability: 'fsync', changeLog: true, datacenter: 'dc1' });
const exists = (p: string) =>
  stat(p).then(
    () => true,
    () => false,
  );

async function pairsOf(store: LevelStore): Promise<Array<Array<[string, Uint8Array]>>> {
  const chunks: Array<Array<[string, Uint8Array]>> = [];
  const it = store.serverSnapshot(256);
  for (let r = await it.next(); !r.done; r = await it.next()) chunks.push(r.value);
  return chunks;
}

describe('staged stores', () => {
  let dirs: Array<{ path: string; remove: () => Promise<void> }>;
  let leader: LevelStore;
  let follower: LevelStore;

  beforeEach(async () => {
    dirs = [await tempDir(), await tempDir()];
    leader = await open(`${dirs[0]?.path}/store`);
    follower = await open(`${dirs[1]?.path}/store`);
    follower.setFollower(true);
  });

  afterEach(async () => {
    await leader.close();
    await follower.close();
    for (const d of dirs) await d.remove();
  });

  it("a follower takes its leader's snapshot piece by piece, serving its own state until the switch", async () => {
    const mine = tokenRecord({ Description: 'the follower had this' });
    // The follower's own state, as an earlier leader's snapshot gave it.
    const seed = await open(`${dirs[0]?.path}/seed`);
    await seed.transact((tx) => tx.put('tokens', mine));
    await follower.installServerSnapshot((await pairsOf(seed)).flat(), { seq: 1, term: 1 });
    await seed.close();
    expect(follower.reader.getToken(mine.AccessorID)?.Description).toBe('the follower had this');

    const tokens = Array.from({ length: 300 }, (_, i) => tokenRecord({ Description: `leader ${i}` }));
    for (const t of tokens) await leader.transact((tx) => tx.put('tokens', t));
    const chunks = await pairsOf(leader);
    expect(chunks.length).toBeGreaterThan(3);
    const intake = await follower.beginServerSnapshot();
    for (const [i, chunk] of chunks.entries()) {
      await intake.add(chunk);
      // Mid-way: the staging is on disk beside the store, and readers still see the old state whole.
      if (i === 1) {
        expect(await exists(stagingDir(`${dirs[1]?.path}/store`))).toBe(true);
        expect(follower.reader.getToken(mine.AccessorID)).toBeDefined();
        expect(follower.reader.getToken(tokens[0]?.AccessorID as string)).toBeUndefined();
      }
    }
    await intake.install({ seq: 9, term: 2 });
    expect(follower.reader.getToken(mine.AccessorID)).toBeUndefined();
    for (const t of tokens) expect(follower.reader.getToken(t.AccessorID)?.Description).toBe(t.Description);
    expect(follower.serverPosition()).toEqual({ seq: 9, term: 2 });
    expect(follower.currentIndex()).toBe(leader.currentIndex());
    expect(await readdir(dirs[1]?.path as string)).toEqual(['store']);
    // And so it is after a restart.
    await follower.close();
    follower = await open(`${dirs[1]?.path}/store`);
    expect(follower.count('tokens')).toBe(300);
    expect(follower.serverPosition()).toEqual({ seq: 9, term: 2 });
  });

  it('a staging given up leaves nothing behind, and the store goes on as it was', async () => {
    const t = tokenRecord();
    await leader.transact((tx) => tx.put('tokens', t));
    const intake = await follower.beginServerSnapshot();
    for (const chunk of await pairsOf(leader)) await intake.add(chunk);
    await intake.abandon();
    expect(await readdir(dirs[1]?.path as string)).toEqual(['store']);
    expect(follower.reader.getToken(t.AccessorID)).toBeUndefined();
    // A new intake after one given up (a lost connection) works.
    const again = await follower.beginServerSnapshot();
    for (const chunk of await pairsOf(leader)) await again.add(chunk);
    await again.install({ seq: 1, term: 1 });
    expect(follower.reader.getToken(t.AccessorID)).toBeDefined();
  });

  it('one staging at a time: another asked for while one is under way is refused with 409, not cut short', async () => {
    const t = tokenRecord();
    await leader.transact((tx) => tx.put('tokens', t));
    const intake = await follower.beginServerSnapshot();
    await expect(follower.stage()).rejects.toMatchObject({ code: 'CONFLICT' });
    for (const chunk of await pairsOf(leader)) await intake.add(chunk);
    await intake.install({ seq: 1, term: 1 });
    expect(follower.reader.getToken(t.AccessorID)).toBeDefined();
    // Once it has ended, another may start.
    await (await follower.stage()).abandon();
  });

  it('at start, an incomplete staging is removed and the old store opens whole', async () => {
    const t = tokenRecord();
    await leader.transact((tx) => tx.put('tokens', t));
    const storeDir = `${dirs[0]?.path}/store`;
    // A crash mid-staging: the staged store exists, without its READY mark.
    const staged = await StagedStore.create(storeDir);
    await staged.putRecord('tokens', tokenRecord({ Description: 'staged' }));
    await leader.close();
    expect(await settleStagedStore(storeDir)).toBe('removed-incomplete');
    expect(await exists(stagingDir(storeDir))).toBe(false);
    leader = await open(storeDir);
    expect(leader.count('tokens')).toBe(1);
    expect(leader.reader.getToken(t.AccessorID)).toBeDefined();
  });

  it('at start, a complete staging whose swap a crash interrupted is swapped in (either half-way point)', async () => {
    const storeDir = `${dirs[0]?.path}/store`;
    await leader.transact((tx) => tx.put('tokens', tokenRecord({ Description: 'old' })));
    await leader.close();
    for (const crashAfterMove of [false, true]) {
      const staged = await StagedStore.create(storeDir);
      const fresh = tokenRecord({ Description: `new ${crashAfterMove}` });
      await staged.putRecord('tokens', fresh);
      staged.putMeta('\u0000ignored', 1);
      await staged.finish();
      if (crashAfterMove) {
        // The current store was moved aside, the staged one not yet in its place.
        const { rename } = await import('node:fs/promises');
        await rename(storeDir, `${storeDir}.old`);
      }
      leader = await open(storeDir);
      expect(leader.count('tokens')).toBe(1);
      expect(leader.reader.getToken(fresh.AccessorID)?.Description).toBe(fresh.Description);
      expect((await readdir(dirs[0]?.path as string)).sort()).toEqual(['store']);
      await leader.close();
    }
    // An old directory left behind alone is removed too.
    await mkdir(`${storeDir}.old`);
    await writeFile(`${storeDir}.old/x`, 'x');
    expect(await settleStagedStore(storeDir)).toBe('none');
    expect(await exists(`${storeDir}.old`)).toBe(false);
    leader = await open(storeDir);
  });
});
