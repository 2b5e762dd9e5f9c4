import { spawn } from 'node:child_process';
import { stat } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/abandoned-cluster.ts', import.meta.url));

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('watchword/testing', () => {
  it('leaves no daemon and no data dir behind when the process that started the cluster is killed', async () => {
    const harness = spawn(process.execPath, ['--import', 'tsx', FIXTURE], { stdio: ['ignore', 'pipe', 'inherit'] });
    const line = await new Promise<string>((resolve, reject) => {
      let out = '';
      harness.stdout.on('data', (b: Buffer) => {
        out += b.toString();
        if (out.includes('\n')) resolve(out.split('\n')[0] as string);
      });
      harness.once('exit', (code) => reject(new Error(`harness exited with ${code}`)));
    });
    const daemons = JSON.parse(line) as Array<{ pid: number; url: string; dataDir: string }>;
    expect(daemons).toHaveLength(2);
    for (const d of daemons) expect((await fetch(`${d.url}/v1/status/leader`)).status).toBe(200);

    harness.kill('SIGKILL');
    await waitFor(() => daemons.every((d) => !alive(d.pid)), 15_000, 100);
    for (const d of daemons) {
      await expect(fetch(`${d.url}/v1/status/leader`)).rejects.toThrow();
      await expect(stat(d.dataDir)).rejects.toMatchObject({ code: 'ENOENT' });
    }
  }, 60_000);
});
