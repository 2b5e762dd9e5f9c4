import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { startDaemon } from '../../src/daemon.js';
import { MANAGEMENT_SECRET, type TestDaemon, apiFor, startTestDaemon } from '../helpers/test-daemon.js';

const onDir = (dataDir: string) =>
  startDaemon(loadConfig({ flags: { http_addr: '127.0.0.1:0', data_dir: dataDir, log_level: 'silent', node_name: 'second' } }), {
    logger: pino({ level: 'silent' }),
  });

/** The store's LevelDB, which it closes at times (a reopen after a start's scan, a clean stop's checkpoint). */
const levelOf = (t: TestDaemon) =>
  (t.daemon.store as unknown as { core: { db: { open(): Promise<void>; close(): Promise<void> } } }).core.db;

describe('the data dir lock', () => {
  let first: TestDaemon | undefined;
  afterEach(async () => {
    await first?.close();
    first = undefined;
  });

  it('refuses a second daemon while the first has its store closed, and lets one start once the first has stopped', async () => {
    first = await startTestDaemon();
    const { dataDir } = first;
    // As while a start reopens LevelDB after its scan or a stop writes the checkpoint: LevelDB's own lock is free.
    await levelOf(first).close();
    await expect(onDir(dataDir)).rejects.toThrow(`data dir ${dataDir} is in use by another process (its lock is held)`);
    await levelOf(first).open();
    // The first one was not disturbed: it still answers, with what it holds.
    expect((await first.api('GET', '/v1/acl/token/self')).status).toBe(200);
    await first.daemon.close();
    const next = await onDir(dataDir);
    try {
      const self = await apiFor(next.url, MANAGEMENT_SECRET)('GET', '/v1/acl/token/self');
      expect(self.status).toBe(200);
    } finally {
      await next.close();
    }
  });
});
