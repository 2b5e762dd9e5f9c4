import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, open, readFile, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * LazyFS (INESC TEC's FUSE file system, as etcd's robustness tests and Jepsen use it): what is
 * written stays in its own page cache until fsync, and `clear-cache` drops whatever was never
 * synced, as a power cut would. A data dir mounted on it, a SIGKILL, then `clearCache()`: the
 * disk as it would be after the power came back.
 *
 * The binary: $WATCHWORD_LAZYFS, else where LazyFS's build script puts it
 * (/var/tmp/lazyfs-build/lazyfs/build/lazyfs); `.ci/run` builds it.
 */
export const LAZYFS_BINARY = process.env.WATCHWORD_LAZYFS ?? '/var/tmp/lazyfs-build/lazyfs/build/lazyfs';

/** Why power cuts cannot be simulated here (undefined: they can). */
export function lazyfsUnavailable(): string | undefined {
  if (!existsSync('/dev/fuse')) return 'power cuts: no /dev/fuse (FUSE is unavailable here)';
  if (process.getuid?.() !== 0) return 'power cuts: mounting LazyFS needs root';
  if (!existsSync(LAZYFS_BINARY)) return `power cuts: LazyFS is not built (no ${LAZYFS_BINARY}; .ci/run builds it)`;
  if (!hasFusermount()) return 'power cuts: fusermount3 is missing (Debian package fuse3)';
  return undefined;
}

function hasFusermount(): boolean {
  try {
    execFileSync('fusermount3', ['-V'], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** How long a mount may take (a caller's hook must allow for it). */
export const MOUNT_WAIT_MS = 60_000;

/**
 * Where LazyFS's configuration is written. LazyFS takes `--config-path P` only when P does not
 * contain "-o" in any letter case (it takes such a P for a FUSE option and falls back to
 * `config/default.toml`, which is not there): a temporary directory named `…-ObtcNQ` made one
 * mount in thirty fail. So the file goes in `root` when its path allows it, else in a directory
 * of its own under the system's temporary directory.
 */
async function configPath(root: string): Promise<string> {
  const inRoot = join(root, 'lazyfs.toml');
  if (!/-o/i.test(inRoot)) return inRoot;
  for (let attempt = 0; attempt < 10; attempt++) {
    const path = join(await mkdtemp(join(tmpdir(), 'lazyfs_')), 'lazyfs.toml');
    if (!/-o/i.test(path)) return path;
  }
  throw new Error(`LazyFS: no path for its configuration without "-o" in it (it would take one for a FUSE option): ${inRoot}`);
}

/** One LazyFS mount: `dir` is where a data dir goes; what reaches the disk lives in `<root>/backing`. */
export class LazyFS {
  private constructor(
    readonly dir: string,
    private readonly fifo: string,
    private readonly proc: ChildProcess,
  ) {}

  /** Mounts LazyFS at `<root>/mnt` over `<root>/backing` (both made here). */
  static async mount(root: string, cacheMB = 512): Promise<LazyFS> {
    const mnt = join(root, 'mnt');
    const backing = join(root, 'backing');
    const fifo = join(root, 'faults.fifo');
    await mkdir(mnt, { recursive: true });
    await mkdir(backing, { recursive: true });
    const config = await configPath(root);
    await writeFile(
      config,
      [
        '[faults]',
        `fifo_path="${fifo}"`,
        '[cache]',
        'apply_eviction=false',
        '[cache.simple]',
        `custom_size="${cacheMB}mb"`,
        'blocks_per_page=1',
        '[filesystem]',
        'log_all_operations=false',
        'logfile=""',
        '',
      ].join('\n'),
    );
    const proc = spawn(
      LAZYFS_BINARY,
      [mnt, '--config-path', config, '-o', 'allow_other', '-o', 'modules=subdir', '-o', `subdir=${backing}`, '-f'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let err = '';
    const keep = (c: Buffer) => void (err = (err + c.toString()).slice(-4000));
    proc.stdout?.on('data', keep);
    proc.stderr?.on('data', keep);
    const fs = new LazyFS(mnt, fifo, proc);
    // LazyFS touches its whole cache before it mounts: half a gigabyte took over 10 s on a
    // loaded two-core machine running the suite beside it.
    const deadline = Date.now() + MOUNT_WAIT_MS;
    while (!(await fs.mounted())) {
      if (proc.exitCode !== null || Date.now() > deadline) {
        proc.kill('SIGKILL');
        throw new Error(`LazyFS did not mount at ${mnt} within ${MOUNT_WAIT_MS / 1000} s: ${err.trim() || `exit ${proc.exitCode}`}`);
      }
      await sleep(50);
    }
    return fs;
  }

  private async mounted(): Promise<boolean> {
    const mounts = await readFile('/proc/mounts', 'utf8');
    return mounts.split('\n').some((l) => l.split(' ')[1] === this.dir) && existsSync(this.fifo);
  }

  /**
   * The power cut: every byte written but never synced is dropped. Resolves once LazyFS has done
   * it (a file written without sync just before is empty again).
   */
  async clearCache(): Promise<void> {
    const probe = join(this.dir, `.power-cut-${Date.now()}`);
    await writeFile(probe, 'unsynced');
    const fifo = await open(this.fifo, 'w');
    try {
      await fifo.write('lazyfs::clear-cache\n');
    } finally {
      await fifo.close();
    }
    const deadline = Date.now() + 10_000;
    while ((await stat(probe).then((s) => s.size)) !== 0) {
      if (Date.now() > deadline) throw new Error('LazyFS did not drop its cache within 10 s');
      await sleep(20);
    }
  }

  async unmount(): Promise<void> {
    try {
      execFileSync('fusermount3', ['-u', '-z', this.dir], { stdio: 'pipe' });
    } catch {
      // not mounted any more
    }
    if (this.proc.exitCode === null) {
      const exited = new Promise((r) => this.proc.once('exit', r));
      this.proc.kill('SIGTERM');
      await Promise.race([exited, sleep(3000)]);
      if (this.proc.exitCode === null) this.proc.kill('SIGKILL');
    }
  }
}
