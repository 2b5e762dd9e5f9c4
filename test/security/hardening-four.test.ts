import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { type Socket, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Authorizer } from '../../src/client/authorizer.js';
import { AuditLog } from '../../src/observability/audit.js';
import { SNAPSHOT_MAGIC, SnapshotDecoder, SnapshotError } from '../../src/store/snapshot.js';
import { type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';

// The fourth security review's hardening notes, each shown: a wildcard listener without
// http_allowed_hosts warns; a few addresses cannot take the whole connection cap; made-up
// secrets cannot flush an enforcing client's real tokens; a snapshot's large frame costs one
// copy; the audit files are never opened through a symbolic link.

describe('a daemon listening on every address without http_allowed_hosts', () => {
  it('says at start that nothing guards it against DNS rebinding', async () => {
    const lines: string[] = [];
    const logger = pino(
      { level: 'warn' },
      new Writable({
        write(chunk, _e, done) {
          lines.push(String(chunk));
          done();
        },
      }),
    );
    const d = await startTestDaemon({ config: { http_addr: '0.0.0.0:0' }, logger });
    try {
      expect(lines.join('')).toMatch(/every address of this machine, without http_allowed_hosts.*DNS rebinding/);
    } finally {
      await d.close();
    }
  });
});

describe('the connection cap past half full', () => {
  let d: TestDaemon;
  const sockets: Socket[] = [];
  beforeAll(async () => {
    d = await startTestDaemon({ config: { http_max_conns: 200 } });
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await d?.close();
  });

  const open = (localAddress: string) =>
    new Promise<Socket>((resolve, reject) => {
      const u = new URL(d.url);
      const s = connect({ port: Number(u.port), host: u.hostname, localAddress }, () => resolve(s));
      s.on('error', reject);
      sockets.push(s);
    });
  const closedSoon = (s: Socket) =>
    new Promise<boolean>((resolve) => {
      s.on('close', () => resolve(true));
      setTimeout(() => resolve(false), 1_000);
    });

  it('refuses an address holding its fair share, and still admits a new one', async () => {
    // One address takes half the cap (far below http_max_conns_per_client).
    for (let i = 0; i < 100; i++) await open('127.0.0.1');
    await new Promise((r) => setTimeout(r, 100));
    expect(await closedSoon(await open('127.0.0.1'))).toBe(true);
    const newcomer = await open('127.0.0.2');
    expect(await closedSoon(newcomer)).toBe(false);
  });
});

describe("an enforcing client's cache under made-up secrets", () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterAll(() => d?.close());

  it('keeps its real tokens: unknown secrets are remembered apart, bounded on their own', async () => {
    const secrets: string[] = [];
    for (let i = 0; i < 5; i++)
      secrets.push(
        ((await d.api('PUT', '/v1/acl/token', { body: { Policies: [{ Name: 'global-management' }] } })).body as { SecretID: string })
          .SecretID,
      );
    const authz = new Authorizer({ client: { address: d.url }, maxTokens: 5 });
    try {
      for (const s of secrets) expect(await authz.allowed(s, 'service', 'web', 'write')).toBe(true);
      const served = authz.stats().misses;
      for (let i = 0; i < 200; i++) expect(await authz.allowed(crypto.randomUUID(), 'service', 'web', 'write')).toBe(false);
      // Every real token still answered from the cache, without a new look-up.
      const before = authz.stats().misses;
      for (const s of secrets) expect(authz.allowed(s, 'service', 'web', 'write')).toBe(true);
      expect(authz.stats().misses).toBe(before);
      expect(before - served).toBe(200);
    } finally {
      authz.close();
    }
  });
});

describe('a snapshot frame far larger than a chunk', () => {
  /** The magic and a frame length, then `chunks` KiB of the frame's bytes, one KiB at a time; the bytes Buffer.concat copied. */
  function feed(frameBytes: number, chunks: number): { copied: number; error: unknown } {
    const decoder = new SnapshotDecoder();
    const real = Buffer.concat.bind(Buffer);
    let copied = 0;
    const spy = vi.spyOn(Buffer, 'concat').mockImplementation((list: readonly Uint8Array[], total?: number) => {
      const out = real(list, total);
      copied += out.length;
      return out;
    });
    let error: unknown;
    try {
      const length = Buffer.alloc(4);
      length.writeUInt32BE(frameBytes);
      decoder.push(Buffer.concat([SNAPSHOT_MAGIC, length]));
      const chunk = Buffer.alloc(1024, 0xc1);
      for (let i = 0; i < chunks; i++) decoder.push(chunk);
    } catch (err) {
      error = err;
    } finally {
      spy.mockRestore();
    }
    return { copied, error };
  }

  it('is joined once when it is whole, not copied again with every chunk', () => {
    // 8 MiB in 1 KiB chunks: before, each chunk copied everything held so far (~32 GiB in all).
    const { copied, error } = feed(8 << 20, 8 * 1024 + 64);
    // Whole, it is decoded (and refused: it is not msgpack); the copies stayed a few times its size.
    expect(error).toBeInstanceOf(SnapshotError);
    expect(copied).toBeLessThan(4 * (8 << 20));
  });

  it('refuses a frame larger than any record could be, as soon as its length is read', () => {
    const { error } = feed(64 << 20, 1);
    expect(error).toBeInstanceOf(SnapshotError);
    expect((error as Error).message).toMatch(/a frame of 67108864 bytes is larger than any record/);
  });
});

describe('the audit log and symbolic links', () => {
  it('refuses to open an audit file that is a symbolic link, and leaves its target as it was', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'watchword-audit-link-'));
    try {
      await mkdir(join(dir, 'audit'));
      const target = join(dir, 'elsewhere.txt');
      await writeFile(target, 'keep me\n');
      await symlink(target, join(dir, 'audit', 'audit.log'));
      const log = new AuditLog(
        { enabled: true, path: join(dir, 'audit', 'audit.log'), mode: 'best-effort', rotateBytes: 1 << 20, maxFiles: 2 },
        { datacenter: 'dc1', server: 's1' },
        pino({ level: 'silent' }),
      );
      await expect(log.open()).rejects.toMatchObject({ code: 'ELOOP' });
      expect(await readFile(target, 'utf8')).toBe('keep me\n');
      await log.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
