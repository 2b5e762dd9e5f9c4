import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(import.meta.url);
const fromSource = here.endsWith('.ts');

/**
 * How to run the `watchword` executable as a child process (node's arguments before the
 * command's own): the bundle the test suite builds once (WATCHWORD_AGENT_ENTRY, see
 * scripts/agent-build.ts), else the sources through tsx when this module runs from source,
 * else the built dist/main.js. Every spawner (harness, tests, scripts) goes through here.
 */
export function watchwordCommand(): string[] {
  const built = process.env.WATCHWORD_AGENT_ENTRY;
  if (built) return [built];
  const main = join(here, '..', '..', fromSource ? 'main.ts' : 'main.js');
  return fromSource ? ['--import', 'tsx', main] : [main];
}
