/**
 * A watchword daemon as a child process for the load scripts: started as `npm start` starts
 * it (dist/, see daemonEntry) on a free loopback port, ready once it has written
 * DATA_DIR/http-addr. (Tests use src/testing's startCluster; the scripts need to seed a data
 * dir first.)
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { watchwordCommand } from '../src/testing/command.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

export interface DaemonProcess {
  proc: ChildProcess;
  url: string;
}

/**
 * The daemon the scripts measure is the one `npm start` runs: dist/main.js, built first when a
 * source is newer (scripts/build-if-stale.mjs, as `npm start` does), unless
 * WATCHWORD_AGENT_ENTRY names another. Every spawner the script then uses (these helpers, and
 * src/testing's startCluster) starts that. From source through tsx, each start would spend
 * ~0.8 s more transpiling (a million tokens' first start: 5.9-6.4 s against 5.0-5.2 s).
 */
export function useBuiltDaemon(): void {
  if (process.env.WATCHWORD_AGENT_ENTRY) return;
  execFileSync(process.execPath, [join(ROOT, 'scripts', 'build-if-stale.mjs')], { stdio: 'inherit' });
  process.env.WATCHWORD_AGENT_ENTRY = join(ROOT, 'dist', 'main.js');
}

/**
 * Starts `watchword agent` on `dataDir` with extra flags; its output goes to our stderr when
 * `logLevel` is set. `pin` runs it on those CPUs only (taskset), so that a load generator
 * pinned elsewhere does not share its core (docs/development.md, "Development"). Ready once it has written its address
 * (after loading its store), within `readyWithinMs`. `ownNodeFlags` are node's own flags for this
 * daemon alone.
 */
export async function startDaemonProcess(
  dataDir: string,
  flags: string[],
  logLevel?: string,
  pin?: string,
  readyWithinMs = 20_000,
  ownNodeFlags: string[] = [],
): Promise<DaemonProcess> {
  await rm(join(dataDir, 'http-addr'), { force: true });
  useBuiltDaemon();
  // BENCH_DAEMON_NODE_FLAGS: node's own flags for every daemon (`--cpu-prof --cpu-prof-dir=…` to profile a run);
  // `ownNodeFlags`, this one's.
  const nodeFlags = [...(process.env.BENCH_DAEMON_NODE_FLAGS ? process.env.BENCH_DAEMON_NODE_FLAGS.split(' ') : []), ...ownNodeFlags];
  const command = [process.execPath, ...nodeFlags, ...watchwordCommand(), 'agent', '--data-dir', dataDir, '--http-addr', '127.0.0.1:0', '--log-level', logLevel ?? 'error', ...flags];
  const pinned = pin !== undefined ? ['taskset', '-c', pin, ...command] : command;
  const proc = spawn(
    pinned[0] as string,
    pinned.slice(1),
    // The daemon ends with this script, however it ends (WATCHWORD_LIFELINE: our end of its stdin).
    { cwd: ROOT, env: { ...process.env, WATCHWORD_LIFELINE: 'stdin' }, stdio: ['pipe', logLevel ? 'inherit' : 'ignore', 'inherit'] },
  );
  for (let i = 0; i < readyWithinMs / 50; i++) {
    if (proc.exitCode !== null) throw new Error(`daemon exited with ${proc.exitCode}`);
    try {
      const addr = (await readFile(join(dataDir, 'http-addr'), 'utf8')).trim();
      if (addr) return { proc, url: `${flags.includes('--tls-cert-file') ? 'https' : 'http'}://${addr}` };
    } catch {
      // not written yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`daemon did not start within ${readyWithinMs / 1000} s`);
}

/** SIGTERM, and wait for the exit. */
export async function stopDaemonProcess(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGTERM');
  await exited;
}
