import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { access, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/test-daemon.js';
import { tempDir } from '../helpers/temp-dir.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** PIDs of `… agent` processes whose command line names this data dir. */
function agentsOn(dataDir: string): number[] {
  const out = execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' });
  return out
    .split('\n')
    .filter((l) => l.includes(' agent') && l.includes(dataDir))
    .map((l) => Number(l.trim().split(/\s+/)[0]));
}

/**
 * A supervisor signals the PID it started: SIGTERM to `npm start` or `npx watchword agent`
 * stops the daemon (gracefully, within 10 s), leaving no `node … agent` behind.
 */
describe('signals reach the daemon through npm', () => {
  const started: ChildProcess[] = [];
  afterEach(() => {
    for (const p of started.splice(0)) p.kill('SIGKILL');
  });

  it.each([
    ['npm start', ['start', '--', '--data-dir']],
    ['npx watchword agent', ['exec', '--', 'watchword', 'agent', '--data-dir']],
  ] as const)(
    'SIGTERM to the PID of %s stops the daemon within 10 s',
    async (_, args) => {
      const dir = await tempDir();
      try {
        const dataDir = join(dir.path, 'dc1');
        const npm = spawn('npm', [...args, dataDir], {
          cwd: ROOT,
          env: { ...process.env, WATCHWORD_HTTP_ADDR: '127.0.0.1:0' },
          stdio: ['ignore', 'ignore', 'pipe'],
        });
        started.push(npm);
        let stderr = '';
        npm.stderr?.on('data', (chunk: Buffer) => {
          stderr += chunk.toString();
        });
        await waitFor(
          async () => {
            // A fresh clone's `npx watchword` once exited at once (its bin was not executable): say so, don't wait.
            if (npm.exitCode !== null) throw new Error(`npm ${args[0]} exited ${npm.exitCode} before serving: ${stderr.trim()}`);
            return (await readFile(join(dataDir, 'http-addr'), 'utf8').catch(() => '')) !== '';
          },
          90_000,
          200,
        );
        const address = (await readFile(join(dataDir, 'http-addr'), 'utf8')).trim();
        expect((await fetch(`http://${address}/v1/agent/health`)).status).toBe(200);
        expect(agentsOn(dataDir).length).toBeGreaterThan(0);
        const sent = Date.now();
        npm.kill('SIGTERM');
        await waitFor(() => agentsOn(dataDir).length === 0, 10_000, 100);
        expect(Date.now() - sent).toBeLessThan(10_000);
        await expect(fetch(`http://${address}/v1/agent/health`)).rejects.toThrow();
      } finally {
        await dir.remove();
      }
    },
    120_000,
  );

  it.each(['SIGTERM', 'SIGHUP'] as const)(
    '%s to the PID of npm run cluster stops its daemons and removes their data',
    async (signal) => {
      const npm = spawn('npm', ['run', 'cluster', '--', 'dc1'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
      started.push(npm);
      let out = '';
      npm.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()));
      npm.stderr?.on('data', (chunk: Buffer) => (out += chunk.toString()));
      await waitFor(
        () => {
          if (npm.exitCode !== null) throw new Error(`npm run cluster exited ${npm.exitCode}: ${out}`);
          return /data: \S+/.test(out);
        },
        90_000,
        200,
      );
      const dataDir = /data: (\S+)/.exec(out)?.[1] as string;
      expect(agentsOn(dataDir).length).toBe(1);
      const sent = Date.now();
      npm.kill(signal);
      await waitFor(() => agentsOn(dataDir).length === 0, 15_000, 100, 'the daemons stopped');
      await waitFor(
        async () =>
          (await access(dataDir).then(
            () => true,
            () => false,
          )) === false,
        15_000,
        100,
        'the data dir removed',
      );
      expect(Date.now() - sent).toBeLessThan(15_000);
    },
    120_000,
  );
});
