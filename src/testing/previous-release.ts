import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PREVIOUS_RELEASE } from '../version.js';

/**
 * Where the previous release's build is kept (scripts/previous-release.ts makes it): outside the
 * checkout, so clean installs and clones share it. $WATCHWORD_PREVIOUS_BUILD, else
 * /var/tmp/watchword-release-<version>-<commit, 12>.
 */
export function previousReleaseDir(): string {
  return (
    process.env.WATCHWORD_PREVIOUS_BUILD ??
    join('/var/tmp', `watchword-release-${PREVIOUS_RELEASE.version}-${PREVIOUS_RELEASE.commit.slice(0, 12)}`)
  );
}

/** The previous release's `dist/main.js`, when it has been built (undefined: run `npx tsx scripts/previous-release.ts`). */
export function previousReleaseEntry(): string | undefined {
  const dir = previousReleaseDir();
  const entry = join(dir, 'dist', 'main.js');
  return existsSync(join(dir, '.built')) && existsSync(entry) ? entry : undefined;
}
