import { request } from 'node:http';
import { readFile, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AgentProcess, spawnAgent } from '../helpers/process.js';
import { tempDir } from '../helpers/temp-dir.js';

// A restore is authorized before its body is read, and its body is streamed to a 0600
// file under a size limit (docs/security.md, "Security"): an anonymous 600 MB upload cannot grow the daemon.

const MANAGEMENT = 'b1ea1d8e-0000-4000-8000-0000000000aa';
const MB = 1024 * 1024;

async function rssBytes(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
}

/**
 * PUT /v1/snapshot with a body of `size` bytes written as fast as the socket takes them,
 * never held in memory here. Resolves with the answer (as soon as it comes, whatever is
 * left unsent) and how long it took.
 */
function upload(
  url: string,
  size: number,
  token?: string,
  pace?: { chunk: number; everyMs: number; onChunk?: (sent: number) => Promise<void> },
) {
  return new Promise<{ status: number; body: string; ms: number; sent: number }>((resolve, reject) => {
    const started = Date.now();
    const target = new URL('/v1/snapshot', url);
    const req = request(target, {
      method: 'PUT',
      headers: {
        'Content-Type': 'application/octet-stream',
        Accept: 'application/json',
        'Content-Length': String(size),
        ...(token ? { 'X-Service-Token': token } : {}),
      },
    });
    let sent = 0;
    let answered = false;
    const chunk = Buffer.alloc(pace?.chunk ?? MB, 0x61);
    req.on('response', (res) => {
      answered = true;
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, ms: Date.now() - started, sent }));
      res.on('error', () => resolve({ status: res.statusCode ?? 0, body, ms: Date.now() - started, sent }));
    });
    // The daemon closes the connection with its answer: a write may then fail, after (or just before) the answer arrives.
    req.on('error', (err) => {
      setTimeout(() => {
        if (!answered) reject(err);
      }, 2000);
    });
    const write = async (): Promise<void> => {
      while (!answered && sent < size) {
        const n = Math.min(chunk.length, size - sent);
        sent += n;
        const more = req.write(n === chunk.length ? chunk : chunk.subarray(0, n));
        if (pace) {
          await pace.onChunk?.(sent);
          await new Promise((r) => setTimeout(r, pace.everyMs));
        } else if (!more) {
          await new Promise<void>((r) => {
            const done = () => r();
            req.once('drain', done);
            req.once('close', done);
          });
        }
        if (req.destroyed) return;
      }
      if (!answered) req.end();
    };
    void write().catch(() => undefined);
  });
}

describe('snapshot uploads', () => {
  let dir: { path: string; remove: () => Promise<void> };
  let agent: AgentProcess;

  beforeAll(async () => {
    dir = await tempDir();
    agent = await spawnAgent(dir.path, ['--initial-management-token', MANAGEMENT, '--snapshot-max-bytes', String(4 * MB)]);
  }, 30_000);

  afterAll(async () => {
    await agent?.stop();
    await dir?.remove();
  });

  it('answers four parallel anonymous 600 MB uploads with 403 within a second each, and the daemon does not grow', async () => {
    const pid = agent.proc.pid as number;
    const before = await rssBytes(pid);
    const answers = await Promise.all(Array.from({ length: 4 }, () => upload(agent.url, 600 * MB)));
    const after = await rssBytes(pid);
    for (const a of answers) {
      expect(a.status).toBe(403);
      expect(JSON.parse(a.body)).toMatchObject({ code: 'PERMISSION_DENIED' });
      expect(a.ms).toBeLessThan(1000);
      expect(a.sent).toBeLessThan(600 * MB);
    }
    expect(after - before).toBeLessThan(50 * MB);
  }, 30_000);

  it('refuses an unknown token before the body, and a token without operator:write', async () => {
    const unknown = await upload(agent.url, 50 * MB, '00000000-dead-4000-8000-000000000000');
    expect(unknown.status).toBe(403);
    expect(JSON.parse(unknown.body)).toMatchObject({ code: 'ACL_NOT_FOUND' });
    expect(unknown.ms).toBeLessThan(1000);
    const put = async (path: string, body: unknown) =>
      (
        await fetch(`${agent.url}${path}`, { method: 'PUT', headers: { 'X-Service-Token': MANAGEMENT }, body: JSON.stringify(body) })
      ).json() as Promise<Record<string, string>>;
    const policy = await put('/v1/acl/policy', { Name: 'acl-only', Rules: 'acl = "write"' });
    const token = await put('/v1/acl/token', { Policies: [{ ID: policy.ID }] });
    const denied = await upload(agent.url, 50 * MB, token.SecretID);
    expect(denied.status).toBe(403);
    expect(JSON.parse(denied.body).message).toMatch(/lacks permission 'operator:write'/);
    expect(denied.ms).toBeLessThan(1000);
  });

  it('answers 413 past snapshot_max_bytes (declared or streamed), keeping no temporary file', async () => {
    const declared = await upload(agent.url, 5 * MB, MANAGEMENT);
    expect(declared.status).toBe(413);
    expect(JSON.parse(declared.body).message).toMatch(/Snapshot is too large \(limit 4194304 bytes: snapshot_max_bytes\)/);
    // Without a length (chunked), the limit applies to what arrives.
    const chunked = await new Promise<number>((resolve, reject) => {
      const req = request(new URL('/v1/snapshot', agent.url), {
        method: 'PUT',
        headers: { 'X-Service-Token': MANAGEMENT, Accept: 'application/json', 'Transfer-Encoding': 'chunked' },
      });
      let answered = false;
      req.on('response', (res) => {
        answered = true;
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', (err) => setTimeout(() => !answered && reject(err), 2000));
      const chunk = Buffer.alloc(MB, 1);
      let n = 0;
      const write = () => {
        while (n < 8) {
          n++;
          if (!req.write(chunk)) return void req.once('drain', write);
        }
        req.end();
      };
      write();
    });
    expect(chunked).toBe(413);
    expect((await readdir(dir.path)).filter((f) => f.startsWith('snapshot-upload-'))).toEqual([]);
  });

  it('keeps an authorized upload in a 0600 file of the data dir while it arrives, and removes it after (a bad file: 400)', async () => {
    const modes: number[] = [];
    const answer = await upload(agent.url, 1 * MB, MANAGEMENT, {
      chunk: 256 * 1024,
      everyMs: 100,
      onChunk: async () => {
        for (const f of (await readdir(dir.path)).filter((x) => x.startsWith('snapshot-upload-')))
          modes.push((await stat(join(dir.path, f))).mode & 0o777);
      },
    });
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body).message).toMatch(/^Invalid snapshot: not a watchword snapshot/);
    expect(modes.length).toBeGreaterThan(0);
    expect(new Set(modes)).toEqual(new Set([0o600]));
    expect((await readdir(dir.path)).filter((f) => f.startsWith('snapshot-upload-'))).toEqual([]);
  });
});
