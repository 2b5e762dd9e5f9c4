/**
 * The second half of `npm run build` (tsc's output is the first): the agent bundled into
 * `dist/agent/` as the test suite runs it (agent-build.ts), and `dist/main.js`, the
 * `watchword` executable, replaced by a file that runs that bundle. A daemon then starts
 * from a few files instead of resolving and loading a few hundred of `dist/` and node_modules:
 * from spawn to the first answered request, 0.48 s against 0.69 s on a new data dir, and
 * 0.3-0.6 s sooner on a million tokens.
 */
import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleAgent } from './agent-build.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DIST = join(ROOT, 'dist');

await bundleAgent(join(DIST, 'agent'));
const main = join(DIST, 'main.js');
// src/main.ts's first line, node's flags for the daemon with it (src/testing/command.ts, DAEMON_NODE_FLAGS).
const hashbang = readFileSync(join(ROOT, 'src', 'main.ts'), 'utf8').split('\n', 1)[0] as string;
writeFileSync(main, `${hashbang}\n// The agent and CLI, bundled (scripts/build-dist.ts).\nimport './agent/main.js';\n`);
chmodSync(main, 0o755);

// The checkout's own `watchword` on the PATH of npm scripts and npx, and of a shell that adds
// node_modules/.bin (README, "Set up"): npm links the bins of dependencies there, never the
// package's own, so `npx watchword` went looking for it (seconds; on a fresh machine, the registry).
const bin = join(ROOT, 'node_modules', '.bin');
if (existsSync(join(ROOT, 'node_modules'))) {
  mkdirSync(bin, { recursive: true });
  const link = join(bin, 'watchword');
  if (lstatSync(link, { throwIfNoEntry: false }) !== undefined) rmSync(link);
  symlinkSync(join('..', '..', 'dist', 'main.js'), link);
}
