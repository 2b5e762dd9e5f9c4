/**
 * The agent as the test suite runs it: `src/main.ts` and the packages it imports bundled by
 * esbuild (the transpiler tsx uses, without type checks; `npm run typecheck` does those) into
 * one ESM file with its lazy chunks, so that each of the suite's hundreds of daemon and CLI
 * processes starts without transpiling every source file through tsx's loader hooks or
 * resolving a few hundred files of node_modules: about 0.5 s of CPU per daemon start against
 * 0.9 s with the packages left as imports (`--cpu-prof` of one start: module resolution and
 * loading were most of it). Built once per `npm test` (vitest's global setup), in a second
 * or two. Packages with native code or files they read beside themselves stay imports. The
 * output sits two levels below the checkout, where `src/` resolves from `import.meta.url` as
 * it does from `src/` and `dist/`. `npm run build` makes the same bundle in `dist/agent/`
 * (scripts/build-dist.ts), which `dist/main.js` runs: `npm start`, the `watchword` executable
 * and the published package start it (test/e2e/signals.test.ts starts that form); the rest of
 * `dist/` is tsc's output, for the client and testing libraries.
 */
import { readFileSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BUILD_PREFIX = '.watchword-agent-';
const MODULES = join(ROOT, 'node_modules');

/** Left as imports: native addons, and packages that read files beside their own code. */
const NATIVE_OR_FILES = ['classic-level', 'msgpackr-extract', 'etcd3', '@cdktf/hcl2json', 'pino-roll'];

/**
 * Packages the sources load with `import()` (on first use) stay imports too: esbuild's chunk
 * for a CommonJS package has only a default export, so `(await import('undici')).Agent`
 * would be undefined in the bundle while node's own loader finds it, as in `dist/`.
 */
function lazilyImported(dir: string): string[] {
  const found = new Set<string>();
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
    const text = readFileSync(join(entry.parentPath, entry.name), 'utf8');
    for (const m of text.matchAll(/\bimport\('([^.'][^']*)'\)/g)) {
      const name = m[1] as string;
      if (!name.startsWith('node:')) found.add(name);
    }
  }
  return [...found];
}

/**
 * Builds the bundle into a directory of this run's own (another test run in the same checkout
 * keeps its bundle while this one builds); returns the path of its main.js. Directories of
 * runs that are gone are removed.
 */
export async function buildAgent(): Promise<string> {
  removeStaleBuilds();
  const outdir = join(MODULES, `${BUILD_PREFIX}${process.pid}`);
  await bundleAgent(outdir);
  return join(outdir, 'main.js');
}

/**
 * Bundles the agent into `outdir` (emptied first), which must sit two levels below the checkout:
 * `main.js`, the worker thread's file (`selector-worker.js`) and their shared chunks.
 */
export async function bundleAgent(outdir: string): Promise<void> {
  // Chunks are named by their content: a stale one from an earlier build would stay beside the new.
  rmSync(outdir, { recursive: true, force: true });
  await build({
    // A worker thread is started from a file beside the code that starts it (src/threads.ts): the
    // selector thread (auth/selectors.ts).
    entryPoints: {
      main: join(ROOT, 'src/main.ts'),
      'selector-worker': join(ROOT, 'src/auth/selector-worker.ts'),
    },
    outdir,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    external: [...NATIVE_OR_FILES, ...lazilyImported(join(ROOT, 'src'))],
    // The bundled CommonJS packages call require(): give the ESM output one.
    banner: { js: "import { createRequire as __watchwordRequire } from 'node:module'; const require = __watchwordRequire(import.meta.url);" },
    // Read by node only with --enable-source-maps (WATCHWORD_DAEMON_NODE_FLAGS): parsing an
    // inline map on every start cost more than the rest of the bundle.
    sourcemap: 'linked',
    logLevel: 'error',
  });
}

/** Builds whose run has ended (its process is gone). */
function removeStaleBuilds(): void {
  // The one directory every run shared before builds were per run.
  rmSync(join(MODULES, '.watchword-agent'), { recursive: true, force: true });
  for (const name of readdirSync(MODULES)) {
    if (!name.startsWith(BUILD_PREFIX)) continue;
    const pid = Number(name.slice(BUILD_PREFIX.length));
    if (Number.isInteger(pid) && pid > 0 && alive(pid)) continue;
    rmSync(join(MODULES, name), { recursive: true, force: true });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** vitest global setup: build, and tell every spawner where the agent is; the teardown removes it. */
export default async function setup(): Promise<() => void> {
  const entry = await buildAgent();
  process.env.WATCHWORD_AGENT_ENTRY = entry;
  return () => rmSync(join(entry, '..'), { recursive: true, force: true });
}
