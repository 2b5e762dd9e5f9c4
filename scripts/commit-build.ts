/**
 * A build of a commit of this repository's history, made outside the checkout (its own `npm ci`,
 * which builds dist/) and kept: the previous release (scripts/previous-release.ts) and the
 * "before" side of an A/B bench (BENCH_ONLY=ab). A build already there is used as it is.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..');

/** The full hash of `rev` in this clone (a branch, a tag, a short hash). */
export function commitOf(rev: string): string {
  return execFileSync('git', ['-C', ROOT, 'rev-parse', '--verify', `${rev}^{commit}`], { encoding: 'utf8' }).trim();
}

/** Builds `commit` into `dir` unless it is built there already; answers its dist/main.js. `what` names it in the progress line. */
export function buildCommit(commit: string, dir: string, what: string): string {
  const entry = join(dir, 'dist', 'main.js');
  if (existsSync(join(dir, '.built')) && existsSync(entry)) return entry;
  const scratch = `${dir}.partial`;
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(scratch, { recursive: true });
  process.stderr.write(`building ${what} (${commit.slice(0, 12)}) in ${dir} …\n`);
  const tar = execFileSync('git', ['-C', ROOT, 'archive', '--format=tar', commit], { maxBuffer: 512 * 1024 * 1024 });
  execFileSync('tar', ['-x', '-C', scratch], { input: tar });
  execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: scratch, stdio: ['ignore', 'ignore', 'inherit'] });
  if (!existsSync(join(scratch, 'dist', 'main.js'))) throw new Error(`the build of ${what} made no dist/main.js`);
  writeFileSync(join(scratch, '.built'), `${what} ${commit}\n`);
  rmSync(dir, { recursive: true, force: true });
  renameSync(scratch, dir);
  return entry;
}
