import { spawn } from 'node:child_process';
import { readdir, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Level } from 'level';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { watchwordCommand } from '../../src/testing/command.js';
import { encode } from '../../src/store/records.js';
import { META } from '../../src/store/schema.js';
import { apiFor } from '../helpers/test-daemon.js';
import { type AgentProcess, spawnAgent } from '../helpers/process.js';
import { tempDir } from '../helpers/temp-dir.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SECRET = 'startup-safety-secret';

/** Runs `watchword agent` expecting it to refuse: resolves with its exit code and what it printed. */
function refusal(dataDir: string, args: string[] = []): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const proc = spawn(
      process.execPath,
      [...watchwordCommand(), 'agent', '--data-dir', dataDir, '--http-addr', '127.0.0.1:0', '--log-level', 'error', ...args],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    proc.stdout.on('data', (b: Buffer) => (output += b.toString()));
    proc.stderr.on('data', (b: Buffer) => (output += b.toString()));
    const timer = setTimeout(() => proc.kill('SIGKILL'), 20_000);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

describe('start-up refuses a data dir it must not use, in one plain line', () => {
  let dir: { path: string; remove: () => Promise<void> };
  let agent: AgentProcess | undefined;
  beforeEach(async () => {
    dir = await tempDir();
  });
  afterEach(async () => {
    if (agent && agent.proc.exitCode === null && agent.proc.signalCode === null) await agent.kill();
    agent = undefined;
    await dir.remove();
  });

  /** A data dir with tokens in a table file (not only the log): written, stopped, opened and stopped again. */
  async function populated(): Promise<void> {
    agent = await spawnAgent(dir.path, ['--initial-management-token', SECRET]);
    const api = apiFor(agent.url, SECRET);
    for (let i = 0; i < 50; i++) await api('PUT', '/v1/acl/token', { body: { Description: `t${i} ${'x'.repeat(2000)}` } });
    expect(await agent.stop()).toBe(0);
    agent = await spawnAgent(dir.path);
    expect(await agent.stop()).toBe(0);
    agent = undefined;
  }

  it('a store written by a newer format', async () => {
    await populated();
    const db = new Level<string, Uint8Array>(join(dir.path, 'store'), { keyEncoding: 'utf8', valueEncoding: 'view' });
    await db.put(META.format, encode(99));
    await db.close();
    const { code, output } = await refusal(dir.path);
    expect(code).toBe(1);
    expect(output.trim().split('\n')).toEqual([
      `watchword: cannot start: the store in ${join(dir.path, 'store')} has format 99, newer than this build reads (3); run a newer watchword`,
    ]);
  });

  it('a truncated store file, named', async () => {
    await populated();
    const table = (await readdir(join(dir.path, 'store'))).find((f) => f.endsWith('.ldb')) as string;
    expect(table).toBeDefined();
    await truncate(join(dir.path, 'store', table), 100);
    const { code, output } = await refusal(dir.path);
    expect(code).toBe(1);
    const lines = output.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^watchword: cannot start: /);
    expect(lines[0]).toContain(join(dir.path, 'store', table));
  });

  it('a store whose manifest is damaged', async () => {
    await populated();
    const manifest = (await readdir(join(dir.path, 'store'))).find((f) => f.startsWith('MANIFEST-')) as string;
    await writeFile(join(dir.path, 'store', manifest), 'not a manifest');
    const { code, output } = await refusal(dir.path);
    expect(code).toBe(1);
    const lines = output.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^watchword: cannot start: cannot open the store in ${join(dir.path, 'store')}: Corruption`));
  });

  it("another datacenter's data dir", async () => {
    await populated();
    const { code, output } = await refusal(dir.path, ['--datacenter', 'dc2']);
    expect(code).toBe(1);
    expect(output.trim().split('\n')).toEqual([
      `watchword: cannot start: the store in ${join(dir.path, 'store')} belongs to datacenter dc1, not dc2; start it as dc1 or give dc2 a data dir of its own`,
    ]);
  });
});

describe('SIGTERM under load', () => {
  it('drains: exit 0, and every acknowledged write is there after a restart', async () => {
    const dir = await tempDir();
    let agent = await spawnAgent(dir.path, ['--initial-management-token', SECRET]);
    try {
      const api = apiFor(agent.url, SECRET);
      const acknowledged: string[] = [];
      let stopping: Promise<number | null> | undefined;
      const worker = async (): Promise<void> => {
        for (;;) {
          try {
            const res = await api('PUT', '/v1/acl/token', { body: { Description: 'drained' } });
            if (res.status === 200) acknowledged.push(res.body.AccessorID);
            else if (res.status !== 503) throw new Error(`unexpected ${res.status}`);
          } catch (err) {
            if ((err as Error).message.startsWith('unexpected')) throw err;
            return;
          }
          if (acknowledged.length >= 200 && !stopping) stopping = agent.stop();
          if (stopping && acknowledged.length > 2000) return;
        }
      };
      await Promise.all(Array.from({ length: 16 }, worker));
      expect(await stopping).toBe(0);
      expect(acknowledged.length).toBeGreaterThanOrEqual(200);
      agent = await spawnAgent(dir.path);
      const present = new Set(
        ((await apiFor(agent.url, SECRET)('GET', '/v1/acl/tokens')).body as Array<{ AccessorID: string }>).map((t) => t.AccessorID),
      );
      expect(acknowledged.filter((id) => !present.has(id))).toEqual([]);
    } finally {
      await agent.stop();
      await dir.remove();
    }
  }, 60_000);
});
