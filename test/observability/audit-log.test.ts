import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { AuditLog, systemActor } from '../../src/observability/audit.js';

// The audit log's own bookkeeping, on a real file: the recent events the endpoint pages through
// (the last 10,000, kept in a ring), following by sequence number, and rotation by size.

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function openLog(rotateBytes = 64 << 20, maxFiles = 3): Promise<{ log: AuditLog; path: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'watchword-audit-'));
  dirs.push(dir);
  const path = join(dir, 'audit', 'audit.log');
  const log = new AuditLog(
    { enabled: true, path, mode: 'best-effort', rotateBytes, maxFiles },
    { datacenter: 'dc1', server: 's1' },
    pino({ level: 'silent' }),
  );
  await log.open();
  return { log, path };
}

describe('AuditLog', () => {
  it('keeps the last 10,000 events: newest first, pages by cursor, follows by sequence', async () => {
    const { log, path } = await openLog();
    for (let i = 1; i <= 10_050; i++) log.record(i % 2 ? 'login' : 'logout', systemActor('test'), 200, { N: i });
    expect(log.latest()).toBe(10_050);
    const first = log.query({ limit: 3 });
    expect(first.events.map((e) => e.N)).toEqual([10_050, 10_049, 10_048]);
    expect(log.query({ limit: 2, before: first.next }).events.map((e) => e.N)).toEqual([10_047, 10_046]);
    expect(log.query({ limit: 2, type: 'login' }).events.map((e) => e.N)).toEqual([10_049, 10_047]);
    // The oldest 50 are gone from memory (the file has them all).
    const all = log.query({ limit: 20_000 });
    expect(all.events).toHaveLength(10_000);
    expect(all.events.at(-1)?.N).toBe(51);
    expect(log.after(0, 3).map((e) => e.seq)).toEqual([51, 52, 53]);
    expect(log.after(10_048, 10).map((e) => e.event.N)).toEqual([10_049, 10_050]);
    expect(log.after(10_050, 10)).toEqual([]);
    await log.close();
    const lines = (await readFile(path, 'utf8')).trim().split('\n');
    expect(lines).toHaveLength(10_050);
    expect(JSON.parse(lines[0] as string)).toMatchObject({ Type: 'login', N: 1, Datacenter: 'dc1', Server: 's1', AccessorID: 'test' });
  });

  it('rotates by size, keeping the configured number of old files', async () => {
    const { log, path } = await openLog(4096, 2);
    for (let round = 0; round < 6; round++) {
      for (let i = 0; i < 20; i++) log.record('reload', systemActor('test'), 200, { Round: round, Pad: 'x'.repeat(100) });
      await log.flush();
    }
    await log.close();
    const sizes = await Promise.all([path, `${path}.1`, `${path}.2`].map(async (p) => (await readFile(p)).length));
    for (const size of sizes) expect(size).toBeLessThanOrEqual(4096);
    await expect(readFile(`${path}.3`)).rejects.toThrow(/ENOENT/);
    // Whole lines everywhere, the newest in audit.log.
    const newest = (await readFile(path, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(newest.at(-1)).toMatchObject({ Round: 5 });
  });

  it('writes each line as JSON.stringify would have written the event: fields in order, a detail repeating a field wins', async () => {
    const { log, path } = await openLog();
    const actor = { RequestID: 'r1', AccessorID: 'a"1', RemoteAddr: '127.0.0.1', Method: 'PUT', Path: '/v1/acl/token?x=\u2028' };
    await log.writeGroup([
      {
        type: 'token-create',
        actor,
        details: { Note: 'line\nbreak', Skipped: undefined },
        raw: '"Index":7,"Objects":[{"Kind":"token","ID":"t1"}]',
      },
    ]);
    log.record('login', actor, 403, { Status: 418, Reason: 'x' });
    await log.close();
    const lines = (await readFile(path, 'utf8')).trim().split('\n');
    expect(lines).toHaveLength(2);
    const first = JSON.parse(lines[0] as string);
    expect(Object.keys(first)).toEqual([
      'Time',
      'Type',
      'RequestID',
      'AccessorID',
      'RemoteAddr',
      'Method',
      'Path',
      'Datacenter',
      'Server',
      'Status',
      'Note',
      'Index',
      'Objects',
    ]);
    expect(first).toMatchObject({ Type: 'token-create', AccessorID: 'a"1', Path: actor.Path, Status: 200, Note: 'line\nbreak', Index: 7 });
    expect(first.Objects).toEqual([{ Kind: 'token', ID: 't1' }]);
    expect(new Date(first.Time).toISOString()).toBe(first.Time);
    // A detail named like a field of the event replaces it, once (no repeated key in the line).
    expect(lines[1]?.match(/"Status"/g)).toHaveLength(1);
    expect(JSON.parse(lines[1] as string)).toMatchObject({ Type: 'login', Status: 418, Reason: 'x' });
    // The endpoint's view is the same event.
    expect(log.query({ limit: 10 }).events.map((e) => e.Type)).toEqual(['login', 'token-create']);
    expect(log.query({ limit: 10, accessor: 'a"1', type: 'token-create' }).events[0]).toEqual(first);
  });
});
