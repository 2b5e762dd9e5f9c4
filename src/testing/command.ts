import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(import.meta.url);
const fromSource = here.endsWith('.ts');

/**
 * Node's flags the daemon runs with, as its executable's first line and `npm start` give
 * them: a young generation of 32 MB (semi-spaces) rather than 16, so that a burst of creates
 * spends less time in scavenges (4-8% more creates a second measured on two cores). 64 MB
 * gave no more, and cost ~200 MB of RSS at the peak of a fresh secondary's catch-up of a
 * million tokens (806 MB against 592) and ~75 MB after a start on them. And an old generation
 * let grow to half again its live size before it is collected, not V8's own factor of up to 4:
 * under a steady churn of logins a secondary's heap swung between 138 and 237 MB (live 60-75 MB),
 * its RSS by 26% (`npm run bench:churn -- 30`); with the fixed factor by 7%.
 */
export const DAEMON_NODE_FLAGS = ['--max-semi-space-size=32', '--heap-growing-percent=50'];

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
