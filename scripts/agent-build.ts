/**
 * The agent as the test suite runs it: `src/main.ts` bundled by esbuild (the transpiler tsx
 * uses, without type checks; `npm run typecheck` does those) into one ESM file with its lazy
 * chunks, so that each of the suite's hundreds of daemon and CLI processes starts in well
 * under a second instead of transpiling every source file through tsx's loader hooks.
 * Built once per `npm test` (vitest's global setup), in about a second; packages stay
 * imports of node_modules. The output sits two levels below the checkout, where `src/`
 * resolves from `import.meta.url` as it does from `src/` and `dist/`.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const AGENT_BUILD_DIR = join(ROOT, 'node_modules', '.watchword-agent');

/** Builds the bundle; returns the path of its main.js. */
export async function buildAgent(): Promise<string> {
  await build({
    entryPoints: [join(ROOT, 'src/main.ts')],
    outdir: AGENT_BUILD_DIR,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    packages: 'external',
    sourcemap: 'inline',
    logLevel: 'error',
  });
  return join(AGENT_BUILD_DIR, 'main.js');
}

/** vitest global setup: build, and tell every spawner where the agent is. */
export default async function setup(): Promise<void> {
  process.env.WATCHWORD_AGENT_ENTRY = await buildAgent();
}
