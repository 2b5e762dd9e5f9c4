import { mkdtemp, rm, writeFile, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LazyFS, lazyfsUnavailable } from '../../src/testing/lazyfs.js';

const unavailable = lazyfsUnavailable();

/**
 * LazyFS takes `--config-path P` only when P holds no "-o" (in any case): a temporary directory
 * whose random name starts with an "o" after its dash once made a power-cut run fail to mount.
 */
describe.skipIf(unavailable !== undefined)(`LazyFS mounts ${unavailable ? `(skipped: ${unavailable})` : ''}`, () => {
  it('whatever the directory it is given is named: here "…-o…", which LazyFS would read as an option', async () => {
    const root = await mkdtemp(join(tmpdir(), 'watchword-lazyfs-o'));
    expect(root).toMatch(/-o/i);
    const fs = await LazyFS.mount(root, 16);
    try {
      await writeFile(join(fs.dir, 'probe'), 'synced?');
      expect(await readFile(join(fs.dir, 'probe'), 'utf8')).toBe('synced?');
    } finally {
      await fs.unmount();
      await rm(root, { recursive: true, force: true });
    }
  });
});
