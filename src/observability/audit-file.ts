import { constants } from 'node:fs';
import { type FileHandle, open, readdir, rename, rm } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import type { Logger } from 'pino';

/** Opened for appending, created 0600, and never through a symbolic link (a planted link cannot redirect the log). */
const APPEND = constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW;

/**
 * One audit file (audit.ts): appended in whole lines, one append at a time and in order,
 * rotated by size (`file` → `file.1` → … → `file.<maxFiles>`, the oldest dropped). A failed
 * append takes back what it half wrote, so the file stays whole lines, and throws.
 */
export class AuditFile {
  private file: FileHandle | undefined;
  private size = 0;
  /** Appends, one at a time, in order. */
  private chain: Promise<void> = Promise.resolve();
  /** The last append's failure, until one succeeds. */
  failing: Error | undefined;
  failures = 0;
  private lastComplaint = 0;

  constructor(
    private settings: { path: string; rotateBytes: number; maxFiles: number },
    private readonly logger: Logger,
    /** Says what a failure means for writes (enforced mode refuses them). */
    private readonly consequence: () => string = () => '',
  ) {}

  get path(): string {
    return this.settings.path;
  }

  async reopen(): Promise<void> {
    await this.file?.close().catch(() => undefined);
    this.file = undefined;
    const file = await open(this.settings.path, APPEND, 0o600);
    this.file = file;
    await file.chmod(0o600);
    this.size = (await file.stat()).size;
  }

  /** New settings: a new path is opened at the next append. */
  async configure(settings: { path: string; rotateBytes: number; maxFiles: number }): Promise<void> {
    const moved = settings.path !== this.settings.path;
    this.settings = settings;
    if (moved) await this.closeFile();
  }

  /** Appends `lines` (each ending in a newline), synced when asked; resolves once written. */
  append(lines: readonly string[], sync: boolean): Promise<void> {
    const run = () => this.appendNow(lines, sync);
    const next = this.chain.then(run, run);
    this.chain = next.catch(() => undefined);
    return next;
  }

  /** Resolves once every append asked for so far has ended. */
  settled(): Promise<void> {
    return this.chain;
  }

  async close(): Promise<void> {
    await this.chain;
    await this.closeFile();
  }

  private async closeFile(): Promise<void> {
    await this.file?.close().catch(() => undefined);
    this.file = undefined;
  }

  private async appendNow(pending: readonly string[], sync: boolean): Promise<void> {
    let lines = pending;
    try {
      if (!this.file) await this.reopen();
      // The usual case: everything fits before the next rotation, in one write.
      const text = lines.length === 1 ? (lines[0] as string) : lines.join('');
      const bytes = Buffer.byteLength(text);
      if (this.size + bytes <= this.settings.rotateBytes) {
        await this.write(Buffer.from(text), sync);
        lines = [];
      }
      // Whole lines per file: the lines that fit go before a rotation, the rest after it. A synced
      // group's lines stay together (all written or none), whatever its size.
      for (let i = 0; i < lines.length; ) {
        let bytes = 0;
        let j = i;
        for (; j < lines.length; j++) {
          const n = Buffer.byteLength(lines[j] as string);
          if (this.size + bytes + n > this.settings.rotateBytes && this.size + bytes > 0) break;
          bytes += n;
        }
        if (sync && j < lines.length && j > i) j = this.size > 0 ? i : lines.length;
        if (j === i) {
          await this.rotate();
          continue;
        }
        await this.write(Buffer.from(lines.slice(i, j).join('')), sync);
        i = j;
      }
      if (this.failing) this.logger.warn({ path: this.settings.path }, 'audit: the audit log is written again');
      this.failing = undefined;
    } catch (err) {
      this.failing = err as Error;
      this.failures++;
      if (Date.now() - this.lastComplaint > 10_000) {
        this.lastComplaint = Date.now();
        this.logger.error(
          { err: (err as Error).message, path: this.settings.path },
          `audit: cannot write the audit log${this.consequence()}`,
        );
      }
      // A line cut short (a full disk) is taken back, so the file stays whole lines; a handle that
      // failed may be stale (the file moved, the disk came back): it is opened again next time.
      await this.file?.truncate(this.size).catch(() => undefined);
      await this.closeFile();
      throw err;
    }
  }

  /** Appends whole lines (synced when asked); the size counts only once they are all written. */
  private async write(data: Buffer, sync: boolean): Promise<void> {
    const file = this.file as FileHandle;
    // A write may be short (a disk filling up): the rest is written, or the error that stops it thrown.
    for (let off = 0; off < data.length; ) {
      const { bytesWritten } = await file.write(data, off, data.length - off);
      if (bytesWritten <= 0) throw Object.assign(new Error('no space left on device'), { code: 'ENOSPC' });
      off += bytesWritten;
    }
    if (sync) await file.datasync();
    this.size += data.length;
  }

  private async rotate(): Promise<void> {
    const { path, maxFiles } = this.settings;
    await this.closeFile();
    // Only the rotated files there are, newest last (one directory read, not a rename tried for every number up to maxFiles).
    const base = `${basename(path)}.`;
    const held = (await readdir(dirname(path)).catch(() => [] as string[]))
      .filter((f) => f.startsWith(base) && /^[1-9]\d*$/.test(f.slice(base.length)))
      .map((f) => Number(f.slice(base.length)))
      .sort((a, b) => b - a);
    for (const i of held) {
      if (i >= maxFiles) await rm(`${path}.${i}`, { force: true });
      else await rename(`${path}.${i}`, `${path}.${i + 1}`).catch(() => undefined);
    }
    await rename(path, `${path}.1`);
    await this.reopen();
  }
}
