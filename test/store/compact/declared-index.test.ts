import { describe, expect, it } from 'vitest';
import type { TokenRecord } from '../../../src/domain/types.js';
import { CompactTable } from '../../../src/store/compact/compact-table.js';
import { tokenCodec } from '../../../src/store/memory.js';
import { encode } from '../../../src/store/records.js';
import { type TableDef, tokensTable } from '../../../src/store/schema.js';
import { tokenRecord } from '../../helpers/records.js';

// An index reads what it declares (`reads`), and a start reads exactly those fields of each
// record: an index on a field no index read before is rebuilt at the next start, not empty
// (before, the fields a start read were listed again by hand beside the indexes).

describe('an index declared on a field no index read before', () => {
  const withDescriptions: TableDef<TokenRecord, string> = {
    ...tokensTable,
    indexes: {
      ...tokensTable.indexes,
      description: { unique: false, reads: ['Description'], keys: (t, emit) => emit(t.Description) },
    },
  };

  it('holds the same members after a restart from the stored bytes as on the running table', () => {
    const running = new CompactTable<TokenRecord, string>(withDescriptions, tokenCodec());
    const stored: Uint8Array[] = [];
    for (let i = 0; i < 50; i++) {
      const t = tokenRecord({ Description: i % 5 === 0 ? 'batch job' : `service ${i}` });
      running.put(t);
      stored.push(encode(t));
    }
    expect(running.memberCount('description', 'batch job')).toBe(10);
    // The next start: only the bytes on disk, read as a start reads them.
    const restarted = new CompactTable<TokenRecord, string>(withDescriptions, tokenCodec());
    for (const bytes of stored) expect(restarted.loadStored(bytes)).toBe(true);
    restarted.finishLoading();
    restarted.verify();
    expect(restarted.memberCount('description', 'batch job')).toBe(10);
    expect([...restarted.sortedMembers('description', 'batch job')]).toEqual([...running.sortedMembers('description', 'batch job')]);
  });

  it('is refused at once when it reads a field the records do not declare', () => {
    const misspelt: TableDef<TokenRecord, string> = {
      ...tokensTable,
      indexes: { ...tokensTable.indexes, typo: { unique: false, reads: ['Descripton'], keys: () => undefined } },
    };
    expect(() => new CompactTable<TokenRecord, string>(misspelt, tokenCodec())).toThrow(
      /reads Descripton, which its records do not declare/,
    );
  });
});
