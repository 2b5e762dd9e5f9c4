import { type ChildProcess, spawn } from 'node:child_process';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { watchwordCommand } from '../../src/testing/command.js';
import { waitFor } from './test-daemon.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface AgentProcess {
  proc: ChildProcess;
  url: string;
  output(): string;
  /** SIGKILL and wait for the exit. */
  kill(): Promise<void>;
  /** SIGTERM and wait for the exit code. */
  stop(): Promise<number | null>;
}

/** Starts `watchword agent` from source as a real child process and waits until it serves. */
export async function spawnAgent(dataDir: string, args: string[] = [], env: Record<string, string> = {}): Promise<AgentProcess> {
  await rm(join(dataDir, 'http-addr'), { force: true });
  const proc = spawn(
    process.execPath,
    // An address given in the environment is the agent's to read: no flag then.
    [
      ...watchwordCommand(),
      'agent',
      '--data-dir',
      dataDir,
      ...(env.WATCHWORD_HTTP_ADDR || env.WATCHWORD_AGENT_HTTP_ADDR ? [] : ['--http-addr', '127.0.0.1:0']),
      '--log-level',
      'warn',
      ...args,
    ],
    {
      cwd: ROOT,
      env: { ...process.env, WATCHWORD_LIFELINE: 'stdin', ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  );
  let out = '';
  proc.stdout?.on('data', (b: Buffer) => (out += b.toString()));
  proc.stderr?.on('data', (b: Buffer) => (out += b.toString()));
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  let address = '';
  await waitFor(
    async () => {
      if (proc.exitCode !== null) throw new Error(`agent exited with ${proc.exitCode}: ${out}`);
      try {
        address = (await readFile(join(dataDir, 'http-addr'), 'utf8')).trim();
        return address !== '';
      } catch {
        return false;
      }
    },
    20_000,
    50,
  );
  return {
    proc,
    url: `http://${address}`,
    output: () => out,
    async kill() {
      proc.kill('SIGKILL');
      await exited;
    },
    async stop() {
      proc.kill('SIGTERM');
      return exited;
    },
  };
}
