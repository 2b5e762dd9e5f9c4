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
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { previousReleaseDir } from '../src/testing/previous-release.js';
import { buildCommit } from './commit-build.js';

const root = join(import.meta.dirname, '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  watchword: { previousRelease: { version: string; commit: string } };
};
const { version, commit } = pkg.watchword.previousRelease;
process.stdout.write(`${buildCommit(commit, previousReleaseDir(), `watchword ${version}`)}\n`);
