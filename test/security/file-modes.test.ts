import { chmod, mkdir, readdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { apiFor } from '../helpers/test-daemon.js';
import { type AgentProcess, spawnAgent } from '../helpers/process.js';
import { tempDir } from '../helpers/temp-dir.js';

async function modes(dir: string, into: Array<[string, number]> = []): Promise<Array<[string, number]>> {
  into.push([dir, (await stat(dir)).mode & 0o777]);
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, e.name);
    if (e.isDirectory()) await modes(path, into);
    else into.push([path, (await stat(path)).mode & 0o777]);
  }
  return into;
}

describe('store files are private to the daemon user', () => {
  let agent: AgentProcess | undefined;
  let dir: Awaited<ReturnType<typeof tempDir>> | undefined;
  afterEach(async () => {
    await agent?.stop();
    await dir?.remove();
    agent = undefined;
  });

  it('creates the data dir 0700 and every file 0600, and tightens an older data dir', async () => {
    dir = await tempDir();
    const dataDir = join(dir.path, 'dc1');
    // A data dir left world-readable by an older version.
    await mkdir(join(dataDir, 'store'), { recursive: true, mode: 0o755 });
    await writeFile(join(dataDir, 'leftover'), 'x', { mode: 0o644 });
    await chmod(dataDir, 0o755);
    agent = await spawnAgent(dataDir, ['--initial-management-token', 'modes-secret']);
    const api = apiFor(agent.url, 'modes-secret');
    for (let i = 0; i < 20; i++) expect((await api('PUT', '/v1/acl/token', { body: { Description: `t${i}` } })).status).toBe(200);
    const all = await modes(dataDir);
    expect(all.length).toBeGreaterThan(5);
    for (const [path, mode] of all) {
      const isDir = (await stat(path)).isDirectory();
      expect(mode.toString(8), path).toBe(isDir ? '700' : '600');
    }
  });
});
