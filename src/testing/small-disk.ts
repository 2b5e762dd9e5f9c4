import { execFileSync } from 'node:child_process';
import { mkdir, open, rm, statfs } from 'node:fs/promises';
import { join } from 'node:path';

/** A small tmpfs for one follower's data dir, so a run can fill its disk (root only). */
export const DISK = '/tmp/watchword-chaos-disk';
export const DISK_SERVER = 'dc1-server-3';

export async function mountSmallDisk(): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return 'full disk on a follower: needs root to mount a small tmpfs; skipped';
  try {
    await mkdir(DISK, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=768m,mode=0700', 'watchword-chaos-disk', DISK], { stdio: 'pipe' });
    return undefined;
  } catch (err) {
    return `full disk on a follower: cannot mount a tmpfs at ${DISK} (${(err as Error).message.split('\n')[0]}); skipped`;
  }
}

export function unmountSmallDisk(): void {
  try {
    execFileSync('umount', [DISK], { stdio: 'pipe' });
  } catch {
    // not mounted
  }
}

/** Fills the small disk to the last byte; the returned function frees it again. */
export async function fillDisk(): Promise<() => Promise<void>> {
  const file = join(DISK, 'filler');
  const { bavail, bsize } = await statfs(DISK);
  const fh = await open(file, 'w');
  try {
    const chunk = Buffer.alloc(1 << 20);
    let left = bavail * bsize;
    while (left > 0) {
      try {
        await fh.write(chunk, 0, Math.min(chunk.length, left));
      } catch {
        break; // full
      }
      left -= chunk.length;
    }
  } finally {
    await fh.close();
  }
  return () => rm(file, { force: true });
}
