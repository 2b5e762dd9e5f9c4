import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(import.meta.url);
const fromSource = here.endsWith('.ts');

/**
 * Node's flags the daemon runs with, as its executable's first line and `npm start` give
 * them: a young generation of 64 MB (semi-spaces) rather than 16, so that loading or
 * writing many tokens (every record survives) is not spent copying them between
 * semi-spaces: a million tokens start in about 10 s instead of 13–16 on a 2-core machine.
 */
export const DAEMON_NODE_FLAGS = ['--max-semi-space-size=64'];

/**
 * How to run the `watchword` executable as a child process (node's arguments before the
 * command's own): the bundle the test suite builds once (WATCHWORD_AGENT_ENTRY, see
 * scripts/agent-build.ts), else the sources through tsx when this module runs from source,
 * else the built dist/main.js. Every spawner (harness, tests, scripts) goes through here.
 */
export function watchwordCommand(): string[] {
  // More of node's flags for every daemon started (`--cpu-prof --cpu-prof-dir=DIR` to profile them).
  const flags = [...DAEMON_NODE_FLAGS, ...(process.env.WATCHWORD_DAEMON_NODE_FLAGS?.split(' ').filter(Boolean) ?? [])];
  const built = process.env.WATCHWORD_AGENT_ENTRY;
  if (built) return [...flags, built];
  const main = join(here, '..', '..', fromSource ? 'main.ts' : 'main.js');
  return fromSource ? [...flags, '--import', 'tsx', main] : [...flags, main];
}
