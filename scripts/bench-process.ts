/** A helper script of the benchmarks (a baseline server, a LevelDB loop) as a child process. */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { stopDaemonProcess } from './daemon-process.js';

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
