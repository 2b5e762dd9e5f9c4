/**
 * The second half of `npm run build` (tsc's output is the first): the agent bundled into
 * `dist/agent/` as the test suite runs it (agent-build.ts), and `dist/main.js`, the
 * `watchword` executable, replaced by a file that runs that bundle. A daemon then starts
 * from a few files instead of resolving and loading a few hundred of `dist/` and node_modules:
 * from spawn to the first answered request, 0.48 s against 0.69 s on a new data dir, and
 * 0.3-0.6 s sooner on a million tokens.
 */
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleAgent } from './agent-build.js';

const DIST = fileURLToPath(new URL('../dist', import.meta.url));

await bundleAgent(join(DIST, 'agent'));
const main = join(DIST, 'main.js');
// The first line as src/main.ts has it: node's flags for the daemon (src/testing/command.ts, DAEMON_NODE_FLAGS).
writeFileSync(main, "#!/usr/bin/env -S node --max-semi-space-size=32\n// The agent and CLI, bundled (scripts/build-dist.ts).\nimport './agent/main.js';\n");
chmodSync(main, 0o755);
