/**
 * Builds the previous release (package.json's `watchword.previousRelease`) from this repository's
 * history, outside the checkout, and prints the path of its `dist/main.js`. A build already there
 * is used as it is. The mixed-version tests and `npm run upgrade-drill` run it beside this one.
 *
 *   npx tsx scripts/previous-release.ts            # prints /var/tmp/watchword-release-0.1.0-4ac2821786c3/dist/main.js
 *
 * Where: $WATCHWORD_PREVIOUS_BUILD, else /var/tmp/watchword-release-<version>-<commit, 12>. Needs
 * git (the commit in this clone's history) and the npm registry (its own `npm ci`, which builds it).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { previousReleaseDir } from '../src/testing/previous-release.js';

const root = join(import.meta.dirname, '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  watchword: { previousRelease: { version: string; commit: string } };
};
const { version, commit } = pkg.watchword.previousRelease;
const dir = previousReleaseDir();
const entry = join(dir, 'dist', 'main.js');
const marker = join(dir, '.built');

if (existsSync(marker) && existsSync(entry)) {
  process.stdout.write(`${entry}\n`);
} else {
  const scratch = `${dir}.partial`;
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(scratch, { recursive: true });
  process.stderr.write(`building watchword ${version} (${commit.slice(0, 12)}) in ${dir} …\n`);
  const tar = execFileSync('git', ['-C', root, 'archive', '--format=tar', commit], { maxBuffer: 512 * 1024 * 1024 });
  execFileSync('tar', ['-x', '-C', scratch], { input: tar });
  // Its own clean install, which builds dist/ (its `prepare`).
  execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: scratch, stdio: ['ignore', 'ignore', 'inherit'] });
  if (!existsSync(join(scratch, 'dist', 'main.js'))) throw new Error(`the build of ${version} made no dist/main.js`);
  writeFileSync(join(scratch, '.built'), `${version} ${commit}\n`);
  rmSync(dir, { recursive: true, force: true });
  renameSync(scratch, dir);
  process.stdout.write(`${entry}\n`);
}
