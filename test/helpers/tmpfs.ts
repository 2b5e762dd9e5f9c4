import { execFileSync } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { tempDir } from './temp-dir.js';

/** A small tmpfs in a temp dir, for a disk that fills (root only); undefined, with a plain reason, when it cannot be mounted. */
export async function mountTmpfs(size: string): Promise<{ path: string; remove: () => Promise<void> } | undefined> {
  const dir = await tempDir();
  const path = join(dir.path, 'small');
  await mkdir(path);
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', path]);
  } catch (err) {
    await dir.remove();
    console.warn(`skipped: cannot mount a tmpfs (${(err as Error).message.split('\n')[0]})`);
    return undefined;
  }
  return {
    path,
    remove: async () => {
      execFileSync('umount', [path]);
      await dir.remove();
    },
  };
}
