import { describe, expect, expectTypeOf, it } from 'vitest';
import { generateID } from '../../src/domain/ids.js';
import { CatchUp } from '../../src/replication/catch-up.js';
import { type PrimaryFrame, type SecondaryFrame, decodeFrame, encodeFrame, primaryFrame } from '../../src/replication/protocol.js';
import { LevelStore } from '../../src/store/level-store.js';
import { TABLES, TABLE_NAMES, type RecordTypes, type RecordsByTable, type TableName, emptyRecords } from '../../src/store/schema.js';
import { type SnapshotContent, readSnapshot, snapshotStream } from '../../src/store/snapshot.js';
import type { Change, GlobalSnapshot } from '../../src/store/store.js';
import { tokenRecord } from '../helpers/records.js';
import { tempDir } from '../helpers/temp-dir.js';

// The tables are listed once (TABLE_NAMES and TABLES in store/schema.ts). Everything that
// carries records per table is derived from that list: the record types, the change log's
// changes, the replication frames, the snapshot file, the secondary's diff, the store's
// global snapshot. These tests go over the list, so a sixth table is covered by adding it
// there (with its schema) and one sample below, which the compiler asks for.

const scope = { Partition: 'default', Namespace: 'default', CreateIndex: 0, ModifyIndex: 0 };

/** One well-formed record of every table: a mapped type, so a new table does not compile without one. */
const SAMPLES: { [T in TableName]: () => RecordTypes[T] } = {
  tokens: () => tokenRecord(),
  policies: () => ({ ID: generateID(), Name: `p-${generateID()}`, Description: '', Rules: '', Hash: 'h', ...scope }),
  roles: () => ({
    ID: generateID(),
    Name: `r-${generateID()}`,
    Description: '',
    Policies: [],
    ServiceIdentities: [],
    NodeIdentities: [],
    TemplatedPolicies: [],
    Hash: 'h',
    ...scope,
  }),
  authMethods: () => ({
    Name: `m-${generateID()}`,
    Type: 'jwt',
    DisplayName: '',
    Description: '',
    MaxTokenTTL: '',
    TokenLocality: '',
    Config: {},
    ...scope,
  }),
  bindingRules: () => ({
    ID: generateID(),
    Description: '',
    AuthMethod: 'm',
    Selector: '',
    BindType: 'service',
    BindName: 'web',
    ...scope,
  }),
  quotas: () => ({
    ID: generateID(),
    Name: `q-${generateID()}`,
    Description: '',
    AuthMethod: '',
    Namespace: 'team-a',
    Partition: '',
    MaxTokens: 10,
    MaxTokenTTL: '',
    MinTokenTTL: '',
    Local: false,
    CreateIndex: 0,
    ModifyIndex: 0,
  }),
};

function oneOfEach(): RecordsByTable & { bootstrap: null } {
  const records = emptyRecords();
  for (const t of TABLE_NAMES) (records[t] as unknown[]).push(SAMPLES[t]());
  return { ...records, bootstrap: null };
}

describe('the table list', () => {
  it('is where every per-table type comes from', () => {
    expectTypeOf<keyof RecordTypes>().toEqualTypeOf<TableName>();
    expectTypeOf<(typeof TABLE_NAMES)[number]>().toEqualTypeOf<TableName>();
    expectTypeOf<keyof typeof TABLES>().toEqualTypeOf<TableName>();
    expectTypeOf<Exclude<Change['Table'], 'bootstrap'>>().toEqualTypeOf<TableName>();
    expectTypeOf<Extract<Change, { Table: 'policies'; Op: 'set' }>['Value']>().toEqualTypeOf<RecordTypes['policies']>();
    expectTypeOf<keyof RecordsByTable>().toEqualTypeOf<TableName>();
    expectTypeOf<Exclude<keyof GlobalSnapshot, 'bootstrap' | 'logID' | 'index'>>().toEqualTypeOf<TableName>();
    expectTypeOf<Exclude<keyof SnapshotContent, 'bootstrap' | 'header'>>().toEqualTypeOf<TableName>();
    type SnapshotFrame = Extract<PrimaryFrame, { t: 'snapshot' }>;
    expectTypeOf<SnapshotFrame['tokens']>().toEqualTypeOf<Array<RecordTypes['tokens']>>();
    expectTypeOf<Pick<SnapshotFrame, TableName>>().toEqualTypeOf<{ [T in TableName]: Array<RecordTypes[T]> }>();
    expectTypeOf<SecondaryFrame['t']>().toBeString();
  });

  it('replication frames carry a record of every table, and a change of every table', () => {
    const state = oneOfEach();
    const snapshot = decodeFrame(
      primaryFrame,
      encodeFrame({ t: 'snapshot', logID: 'l', index: 7, ...emptyRecords(), ...state, last: true } as PrimaryFrame),
    );
    for (const t of TABLE_NAMES) expect((snapshot as Record<string, unknown>)[t], t).toEqual(state[t]);
    const changes: Change[] = TABLE_NAMES.flatMap((t) => [
      { Table: t, Op: 'set', ID: TABLES[t].id(state[t][0] as never), Value: state[t][0] } as Change,
      { Table: t, Op: 'delete', ID: 'gone' } as Change,
    ]);
    const entries = decodeFrame(primaryFrame, encodeFrame({ t: 'entries', entries: [{ Index: 8, Changes: changes }], upTo: 8 }));
    expect(entries).toMatchObject({ t: 'entries', entries: [{ Index: 8, Changes: changes }] });
    // A record that does not fit its table's schema is refused.
    const bad = { t: 'entries', entries: [{ Index: 9, Changes: [{ Table: 'policies', Op: 'set', ID: 'x', Value: { ID: 1 } }] }], upTo: 9 };
    expect(() => decodeFrame(primaryFrame, encodeFrame(bad as unknown as PrimaryFrame))).toThrow();
  });

  it("a secondary's catch-up writes and deletes in every table", async () => {
    const dir = await tempDir();
    const store = await LevelStore.open(`${dir.path}/store`, { durability: 'fsync', changeLog: false, datacenter: 'dc2' });
    try {
      const state = oneOfEach();
      const frame = { t: 'snapshot' as const, logID: 'l', index: 7, ...state, last: true };
      let catchUp = await CatchUp.begin(store);
      await catchUp.add(frame);
      expect((await catchUp.install({ logID: 'l', index: 7 })).changed).toBe(TABLE_NAMES.length);
      for (const t of TABLE_NAMES) expect(store.count(t), t).toBe(1);
      catchUp = await CatchUp.begin(store);
      await catchUp.add({ ...frame, ...emptyRecords(), index: 8 });
      expect((await catchUp.install({ logID: 'l', index: 8 })).changed).toBe(TABLE_NAMES.length);
      for (const t of TABLE_NAMES) expect(store.count(t), t).toBe(0);
    } finally {
      await store.close();
      await dir.remove();
    }
  });

  it('the snapshot file holds and counts every table', async () => {
    const state = oneOfEach();
    const parts: Buffer[] = [];
    for await (const chunk of snapshotStream(
      { ...state, datacenter: 'dc1', primary: true, index: 3, logID: 'l' },
      new Date('2026-01-01T00:00:00Z'),
    ))
      parts.push(chunk as Buffer);
    const content = readSnapshot(Buffer.concat(parts));
    for (const t of TABLE_NAMES) expect(content[t], t).toEqual(state[t]);
    const counts = content.header.Counts as Record<string, number>;
    for (const t of TABLE_NAMES) expect(counts[`${t.charAt(0).toUpperCase()}${t.slice(1)}`], t).toBe(1);
  });

  it("the store's global snapshot has every table's global records", async () => {
    const dir = await tempDir();
    const store = await LevelStore.open(dir.path, { durability: 'os', changeLog: true });
    try {
      const state = oneOfEach();
      await store.transact((tx) => {
        for (const t of TABLE_NAMES) for (const r of state[t]) tx.put(t, r as never);
        tx.put('tokens', tokenRecord({ Local: true }));
      });
      const snap = store.snapshotGlobal();
      for (const t of TABLE_NAMES)
        expect(
          snap[t].slice(0, snap[t].length).map((r) => TABLES[t].id(r as never)),
          t,
        ).toEqual(state[t].map((r) => TABLES[t].id(r as never)));
    } finally {
      await store.close();
      await dir.remove();
    }
  });
});
