import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { TokenRecord } from '../../../src/domain/types.js';
import { CompactTable } from '../../../src/store/compact/compact-table.js';
import { MemTable, tokenCodec } from '../../../src/store/memory.js';
import { encode } from '../../../src/store/records.js';
import { tokensTable } from '../../../src/store/schema.js';
import type { Table } from '../../../src/store/table.js';
import { tokenRecord } from '../../helpers/records.js';
import { seeded } from '../../helpers/random.js';

// The compact table against the object table it stands in for: the same operations on both,
// every answer compared, with a decoded cache small enough that most reads decode again.

type Tokens = Table<TokenRecord, string>;
const compact = (cacheSize: number): Tokens => new CompactTable<TokenRecord, string>(tokensTable, tokenCodec(cacheSize)) as Tokens;

const POLICIES = ['p1', 'p2', 'p3'];
const SERVICES = ['web', 'db'];
const NAMESPACES = ['default', 'team-a'];

function token(rnd: () => number, id: string = randomUUID()): TokenRecord {
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rnd() * xs.length)] as T;
  return tokenRecord({
    AccessorID: id,
    SecretID: rnd() < 0.1 ? `chosen-${Math.floor(rnd() * 50)}` : randomUUID(),
    Description: `token ${Math.floor(rnd() * 1e6)}`,
    Policies: rnd() < 0.5 ? [{ ID: pick(POLICIES) }] : [],
    Roles: rnd() < 0.2 ? [{ ID: 'r1' }] : [],
    ServiceIdentities: rnd() < 0.4 ? [{ ServiceName: pick(SERVICES) }] : [],
    Local: rnd() < 0.3,
    AuthMethod: rnd() < 0.2 ? 'minikube' : '',
    Namespace: pick(NAMESPACES),
    ...(rnd() < 0.5 ? { ExpirationTime: new Date(1_800_000_000_000 + Math.floor(rnd() * 5) * 1000).toISOString() } : {}),
  });
}

function same(a: Tokens, b: Tokens, ids: readonly string[], secrets: readonly string[]): void {
  expect(b.size).toBe(a.size);
  for (const id of ids) expect(b.get(id)).toEqual(a.get(id));
  for (const s of secrets) {
    expect(b.uniqueID('secret', s)).toBe(a.uniqueID('secret', s));
    expect(b.byUnique('secret', s)).toEqual(a.byUnique('secret', s));
  }
  const keys: Array<[string, string]> = [
    ...POLICIES.map((p): [string, string] => ['policy', p]),
    ...SERVICES.map((s): [string, string] => ['service', s]),
    ['role', 'r1'],
    ['authMethod', 'minikube'],
    ['local', ''],
    ...NAMESPACES.map((n): [string, string] => ['scope', `default\u0000${n}`]),
  ];
  for (const [index, key] of keys) {
    expect(b.memberCount(index, key)).toBe(a.memberCount(index, key));
    expect([...b.sortedMembers(index, key)]).toEqual([...a.sortedMembers(index, key)]);
    expect(new Set([...b.members(index, key)].map((t) => t.AccessorID))).toEqual(
      new Set([...a.members(index, key)].map((t) => t.AccessorID)),
    );
  }
  for (const index of ['policy', 'scope', 'service']) expect([...b.indexKeys(index)].sort()).toEqual([...a.indexKeys(index)].sort());
  expect(new Set([...b.values()].map((t) => t.AccessorID))).toEqual(new Set([...a.values()].map((t) => t.AccessorID)));
  expect(b.firstOrdered()).toBe(a.firstOrdered());
  // The expiry index walked in pages, as the reaper walks it.
  const walk = (t: Tokens) => {
    const out: Array<[number, string]> = [];
    let after: [number, string] | undefined;
    for (;;) {
      const page = t.orderedUpTo(1_800_000_003_000, 7, after);
      if (page.length === 0) return out;
      out.push(...page);
      after = page[page.length - 1];
    }
  };
  expect(walk(b)).toEqual(walk(a));
}

/** The table written out as a checkpoint does and read back into a new one (the file's bytes kept in memory). */
function viaDump(t: CompactTable<TokenRecord, string>, cacheSize: number): CompactTable<TokenRecord, string> {
  const { meta, parts } = t.compact.dump();
  const buffers = parts.map((p) => {
    if ('bytes' in p) {
      const b = Buffer.allocUnsafeSlow(p.bytes.length);
      b.set(p.bytes);
      return b;
    }
    const b = Buffer.alloc(p.capacity);
    for (let at = 0; at < p.length; ) {
      const next = p.stream.next();
      if (next.done) throw new Error('records end early');
      b.set(next.value, at);
      at += next.value.length;
    }
    return b;
  });
  const copy = new CompactTable<TokenRecord, string>(tokensTable, tokenCodec(cacheSize));
  copy.compact.restore(JSON.parse(JSON.stringify(meta)), buffers);
  copy.finishLoading();
  return copy;
}

describe('CompactTable', () => {
  for (const seed of [1, 2]) {
    it(`answers as the object table does through puts, replacements, deletes, unread deletes, loads and checkpoints (seed ${seed})`, () => {
      const rnd = seeded(seed);
      const objects: Tokens = new MemTable<TokenRecord, string>(tokensTable);
      let bytes = compact(8);
      const ids: string[] = [];
      const secrets = new Set<string>();
      // Loaded from disk first, as at a start.
      for (let i = 0; i < 200; i++) {
        const t = token(rnd);
        if (objects.uniqueID('secret', t.SecretID) !== undefined) continue;
        expect(objects.loadStored(encode(t))).toBe(true);
        // From the disk's bytes alone (as at a start), or with the record decoded (a snapshot's staging).
        if (i % 2 === 0) expect((bytes as unknown as CompactTable<TokenRecord, string>).loadStored(encode(t))).toBe(true);
        else bytes.put(t, { bytes: encode(t), loading: true });
        ids.push(t.AccessorID);
        secrets.add(t.SecretID);
      }
      objects.finishLoading();
      bytes.finishLoading();
      (bytes as unknown as CompactTable<TokenRecord, string>).verify();
      same(objects, bytes, ids, [...secrets]);
      for (let op = 0; op < 1500; op++) {
        const r = rnd();
        // A secret another live token holds is refused by the store's transactions: never put here either.
        const taken = (t: TokenRecord) => {
          const holder = objects.uniqueID('secret', t.SecretID);
          return holder !== undefined && holder !== t.AccessorID;
        };
        if (r < 0.4) {
          const t = token(rnd);
          if (taken(t)) continue;
          expect(bytes.put(t)).toEqual(objects.put(t));
          ids.push(t.AccessorID);
          secrets.add(t.SecretID);
        } else if (r < 0.75) {
          const id = ids[Math.floor(rnd() * ids.length)] as string;
          const t = token(rnd, id);
          if (taken(t)) continue;
          expect(bytes.put(t)).toEqual(objects.put(t));
          secrets.add(t.SecretID);
        } else if (r < 0.88) {
          const id = ids[Math.floor(rnd() * ids.length)] as string;
          expect(bytes.delete(id)).toEqual(objects.delete(id));
        } else {
          // The reaper's way: the index keys read from the bytes, nothing decoded.
          const id = ids[Math.floor(rnd() * ids.length)] as string;
          const old = objects.delete(id);
          const fields = bytes.deleteUnread(id, ['SecretID', 'CreateTime']);
          expect(fields === undefined).toBe(old === undefined);
          // What was asked for, and what the time order reads.
          if (old !== undefined)
            expect(fields).toMatchObject({
              SecretID: old.SecretID,
              CreateTime: old.CreateTime,
              ...(old.ExpirationTime !== undefined ? { ExpirationTime: old.ExpirationTime } : {}),
            });
        }
        // Every invariant of every structure: after every step at first, then every tenth (each walks the whole table).
        if (op < 300 || op % 10 === 0) (bytes as unknown as CompactTable<TokenRecord, string>).verify();
        if (op % 250 === 0) same(objects, bytes, ids, [...secrets]);
        // Restarted from a checkpoint now and then: the restored table answers, and takes writes, as the first did.
        if (op % 500 === 499) {
          bytes = viaDump(bytes as CompactTable<TokenRecord, string>, 8);
          (bytes as unknown as CompactTable<TokenRecord, string>).verify();
          same(objects, bytes, ids, [...secrets]);
        }
      }
      same(objects, bytes, ids, [...secrets]);
    });
  }

  it('keeps the same object for a record while it stays decoded, and decodes again once it is dropped', () => {
    const t = compact(2);
    const [a, b, c] = [tokenRecord(), tokenRecord(), tokenRecord()];
    for (const r of [a, b, c]) t.put(r);
    // Written records are not kept decoded: the first read decodes, later reads get the same object.
    const first = t.get(a.AccessorID);
    expect(first).toEqual(a);
    expect(first).not.toBe(a);
    expect(t.get(a.AccessorID)).toBe(first);
    expect(t.byUnique('secret', a.SecretID)).toBe(first);
    // Two other records read since: a was dropped, and is decoded again (equal, not the same).
    t.get(b.AccessorID);
    t.get(c.AccessorID);
    const again = t.get(a.AccessorID);
    expect(again).toEqual(a);
    expect(again).not.toBe(first);
    // A new version replaces the decoded one.
    t.put({ ...a, Description: 'changed' });
    expect(t.get(a.AccessorID)?.Description).toBe('changed');
  });

  it('reclaims the bytes of replaced records and keeps every record readable', () => {
    const t = compact(4) as CompactTable<TokenRecord, string>;
    const ids = Array.from({ length: 100 }, () => {
      const tok = tokenRecord({ Description: 'x'.repeat(1000) });
      t.put(tok);
      return tok.AccessorID;
    });
    // ~70 MB of replaced versions: past the floor (4 MiB, for a table this small), the arena is
    // compacted along the way, and never holds more garbage than that.
    let most = 0;
    for (let round = 0; round < 700; round++) {
      for (const id of ids) t.put(tokenRecord({ AccessorID: id, Description: `${round}`.padEnd(1000, 'y') }));
      most = Math.max(most, t.memory.garbageBytes);
    }
    expect(most).toBeLessThanOrEqual(4 * 1024 * 1024 + 2000);
    expect(t.memory.compactions).toBeGreaterThanOrEqual(16);
    expect(t.bytes).toBeLessThan(40 * 1024 * 1024);
    for (const id of ids) expect(t.get(id)?.Description.startsWith('699')).toBe(true);
  });

  it('refuses to load bytes that are not a token, and names a stored token that fails its check when it is decoded', () => {
    const t = compact(4) as CompactTable<TokenRecord, string>;
    expect(t.loadStored(encode('not a map'))).toBe(false);
    expect(t.loadStored(encode({ SecretID: 'x' }))).toBe(false);
    expect(t.loadStored(Uint8Array.of(0x82, 0xaa))).toBe(false);
    // Its indexed fields are well formed, the rest is not: found at load, refused when read.
    const bad = { ...tokenRecord(), Description: 42 };
    expect(t.loadStored(encode(bad))).toBe(true);
    expect(() => t.get(bad.AccessorID)).toThrow(`stored token ${bad.AccessorID} is corrupt`);
    // A list of links that is not a list: not indexable.
    expect(t.loadStored(encode({ ...tokenRecord(), Policies: 'p1' }))).toBe(false);
    expect(t.loadStored(encode({ ...tokenRecord(), ExpirationTime: 'soon' }))).toBe(false);
    // A secret that is not a string: the ID it came with is not left behind either.
    const numbered = { ...tokenRecord(), SecretID: 42 };
    expect(t.loadStored(encode(numbered))).toBe(false);
    expect(t.get(numbered.AccessorID)).toBeUndefined();
    // IDs that are not UUIDs load too (read as strings).
    const chosen = tokenRecord({ AccessorID: 'not-a-uuid', SecretID: 'chosen secret' });
    expect(t.loadStored(encode(chosen))).toBe(true);
    expect(t.byUnique('secret', 'chosen secret')?.AccessorID).toBe('not-a-uuid');
    expect(t.size).toBe(2);
  });

  it('captures the global records as they are: later writes and compaction leave the capture unchanged', () => {
    const t = compact(4) as CompactTable<TokenRecord, string>;
    const globals = Array.from({ length: 50 }, (_, i) => tokenRecord({ Description: `g${i}`.padEnd(2000, 'x') }));
    const locals = Array.from({ length: 10 }, () => tokenRecord({ Local: true }));
    for (const r of [...globals, ...locals]) t.put(r);
    const captured = t.globalRecords();
    expect(captured.length).toBe(50);
    // Every global replaced many times over (the arena compacts along the way), some deleted.
    for (let round = 0; round < 700; round++) for (const g of globals) t.put({ ...g, Description: `${round}`.padEnd(2000, 'y') });
    for (const g of globals.slice(0, 10)) t.delete(g.AccessorID);
    const read = [...captured.slice(0, 20), ...captured.slice(20, 100)];
    expect(read.map((r) => r.AccessorID).sort()).toEqual(globals.map((g) => g.AccessorID).sort());
    expect(read.every((r) => r.Description.startsWith('g') && !r.Local)).toBe(true);
    expect(t.globalRecords().length).toBe(40);
  });
});
