import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { apiFor } from '../helpers/test-daemon.js';
import { type AgentProcess, spawnAgent } from '../helpers/process.js';
import { tempDir } from '../helpers/temp-dir.js';

const SECRET = 'durability-management-secret';

describe('durability across SIGKILL', () => {
  let dir: { path: string; remove: () => Promise<void> };
  let agent: AgentProcess | undefined;

  beforeEach(async () => {
    dir = await tempDir();
  });
  afterEach(async () => {
    if (agent && agent.proc.exitCode === null && agent.proc.signalCode === null) await agent.kill();
    await dir.remove();
  });

  it('finds every token whose create returned 200 after a kill -9 mid-burst', async () => {
    agent = await spawnAgent(dir.path, ['--initial-management-token', SECRET]);
    const api = apiFor(agent.url, SECRET);
    const acknowledged: string[] = [];
    const total = 600;
    const concurrency = 32;
    let next = 0;
    let killed: Promise<void> | undefined;
    const worker = async (): Promise<void> => {
      while (next < total) {
        next++;
        const accessor = crypto.randomUUID();
        try {
          const res = await api('PUT', '/v1/acl/token', { body: { AccessorID: accessor, Description: 'burst' } });
          if (res.status === 200) acknowledged.push(accessor);
        } catch {
          // Connection cut by the kill: not acknowledged, so no promise was made.
        }
        if (acknowledged.length >= 150 && !killed) killed = agent!.kill();
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    await killed;
    expect(acknowledged.length).toBeGreaterThanOrEqual(150);
    expect(acknowledged.length).toBeLessThan(total);

    agent = await spawnAgent(dir.path, ['--initial-management-token', SECRET]);
    const afterRestart = apiFor(agent.url, SECRET);
    const missing: string[] = [];
    for (const id of acknowledged) {
      const res = await afterRestart('GET', `/v1/acl/token/${id}`);
      if (res.status !== 200) missing.push(id);
    }
    expect(missing).toEqual([]);
    // Every stored token is whole: the list decodes and each item is a complete token.
    const list = await afterRestart('GET', '/v1/acl/tokens');
    expect(list.status).toBe(200);
    for (const t of list.body) expect(t.Hash).toBeTypeOf('string');
    expect(await agent.stop()).toBe(0);
  });

  it('never shows a reader a token that a kill -9 then loses', async () => {
    agent = await spawnAgent(dir.path, ['--initial-management-token', SECRET]);
    const api = apiFor(agent.url, SECRET);
    const seen = new Set<string>();
    let acknowledged = 0;
    let stop = false;
    let killed: Promise<void> | undefined;
    const creator = async (): Promise<void> => {
      while (!stop) {
        try {
          const res = await api('PUT', '/v1/acl/token', { body: { Description: 'raced' } });
          if (res.status === 200) acknowledged++;
        } catch {
          return;
        }
        if (acknowledged >= 300 && !killed) {
          stop = true;
          killed = agent!.kill();
        }
      }
    };
    // Readers list and read tokens as fast as they can while the creates land.
    const reader = async (): Promise<void> => {
      while (!stop) {
        try {
          const res = await api('GET', '/v1/acl/tokens');
          if (res.status !== 200) continue;
          for (const t of res.body as Array<{ AccessorID: string; Description: string }>)
            if (t.Description === 'raced') seen.add(t.AccessorID);
        } catch {
          return;
        }
      }
    };
    await Promise.all([...Array.from({ length: 24 }, creator), ...Array.from({ length: 4 }, reader)]);
    await killed;
    expect(seen.size).toBeGreaterThan(0);

    agent = await spawnAgent(dir.path, ['--initial-management-token', SECRET]);
    const afterRestart = apiFor(agent.url, SECRET);
    const present = new Set(((await afterRestart('GET', '/v1/acl/tokens')).body as Array<{ AccessorID: string }>).map((t) => t.AccessorID));
    expect([...seen].filter((id) => !present.has(id))).toEqual([]);
    expect(await agent.stop()).toBe(0);
  });

  it('refuses a second daemon on the same data dir with a one-line error', async () => {
    agent = await spawnAgent(dir.path);
    const second = spawnAgent(dir.path);
    await expect(second).rejects.toThrow(/in use by another process/);
  });
});
