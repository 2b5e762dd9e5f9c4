/** A helper script of the benchmarks (a baseline server, a LevelDB loop) as a child process. */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { type Dirent, readdirSync, statSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type DaemonProcess, startDaemonProcess, stopDaemonProcess } from './daemon-process.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Runs `node --import tsx ARGS…` (on CPUs `pin` only, when given); `firstLine` is the first line it prints. */
export function startProcess(args: string[], pin?: string): { proc: ChildProcess; firstLine: Promise<string> } {
  const command = [process.execPath, '--import', 'tsx', ...args];
  const pinned = pin !== undefined ? ['taskset', '-c', pin, ...command] : command;
  const proc = spawn(pinned[0] as string, pinned.slice(1), { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  const firstLine = new Promise<string>((resolve, reject) => {
    let buf = '';
    proc.stdout?.on('data', (b: Buffer) => {
      buf += b.toString();
      if (buf.includes('\n')) resolve(buf.split('\n')[0] as string);
    });
    proc.once('exit', (code) => reject(new Error(`process exited early with ${code}`)));
  });
  return { proc, firstLine };
}

/** SIGTERM, and wait for the exit. */
export const stopProcess = stopDaemonProcess;

/**
 * Bytes of the files under `dir`, as `du -sb` counts them, walked here: LevelDB deletes a table
 * file while a compaction runs, and `du` fails on a file that goes while it walks.
 */
export function diskUsage(dir: string): number {
  let total = 0;
  let entries: Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const e of entries) {
    const path = join(dir, e.name);
    if (e.isDirectory()) total += diskUsage(path);
    else
      try {
        total += statSync(path).size;
      } catch {
        // gone meanwhile
      }
  }
  return total;
}

/** Whether this machine can pin processes to CPUs (taskset, and a second CPU). */
export function canPin(): boolean {
  if (availableParallelism() < 2) return false;
  try {
    execFileSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Pins this process to `cpus` (taskset's list form, "0" or "0-1"). */
export function pinSelf(list: string): void {
  execFileSync('taskset', ['-cp', list, String(process.pid)], { stdio: 'ignore' });
}

/** Gives this process every CPU back (availableParallelism() would not do: it follows the affinity just set). */
export function unpinSelf(): void {
  pinSelf(`0-${cpus().length - 1}`);
}

export const medianOf = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? (s[(s.length - 1) / 2] as number) : ((s[s.length / 2 - 1] as number) + (s[s.length / 2] as number)) / 2;
};

/** The servers under test of a pinned comparison (see startDaemonAndBaseline). */
export interface DaemonAndBaseline {
  pinned: boolean;
  pin: string | undefined;
  daemon: DaemonProcess;
  /** The bare Fastify route. */
  bareURL: string;
  baselinePid: number | undefined;
  /** The bare node:http route. */
  nodeURL: string;
  nodePid: number | undefined;
  stop(): Promise<void>;
}

/**
 * The servers under test of a pinned comparison: the daemon on `dataDir` (with `flags`), the
 * bare Fastify route and the bare node:http route, all on CPU 1 when this machine can pin
 * (the caller then pins itself to CPU 0); `stop` ends them.
 */
export async function startDaemonAndBaseline(dataDir: string, flags: string[] = []): Promise<DaemonAndBaseline> {
  const pinned = canPin();
  const pin = pinned ? '1' : undefined;
  const daemon = await startDaemonProcess(dataDir, flags, undefined, pin);
  const fastify = startProcess(['scripts/bench-baseline.ts', 'fastify'], pin);
  const node = startProcess(['scripts/bench-baseline.ts', 'node'], pin);
  const stop = async () => {
    await stopDaemonProcess(node.proc);
    await stopDaemonProcess(fastify.proc);
    await stopDaemonProcess(daemon.proc);
  };
  try {
    const bareURL = `http://127.0.0.1:${await fastify.firstLine}/baseline`;
    const nodeURL = `http://127.0.0.1:${await node.firstLine}/baseline`;
    return { pinned, pin, daemon, bareURL, baselinePid: fastify.proc.pid, nodeURL, nodePid: node.proc.pid, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
