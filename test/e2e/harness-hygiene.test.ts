import { spawn } from 'node:child_process';
import { stat } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { etcdBinary } from '../../src/testing/index.js';
import { waitFor } from '../helpers/test-daemon.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/abandoned-cluster.ts', import.meta.url));

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const answers = (url: string) =>
  fetch(url, { signal: AbortSignal.timeout(2000) }).then(
    () => true,
    () => false,
  );

interface Abandoned {
  daemons: Array<{ pid: number; url: string; dataDir: string }>;
  etcd?: { url: string; dataDir: string };
}

/** Starts the fixture (a cluster it never stops), SIGKILLs it, and checks that nothing it started is left. */
async function abandonCluster(servers: number): Promise<Abandoned> {
  const harness = spawn(process.execPath, ['--import', 'tsx', FIXTURE], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, SERVERS: String(servers) },
  });
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    harness.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      if (out.includes('\n')) resolve(out.split('\n')[0] as string);
    });
    harness.once('exit', (code) => reject(new Error(`harness exited with ${code}`)));
  });
  const started = JSON.parse(line) as Abandoned;
  for (const d of started.daemons) expect((await fetch(`${d.url}/v1/status/leader`)).status).toBe(200);
  if (started.etcd) expect(await answers(`${started.etcd.url}/health`)).toBe(true);

  harness.kill('SIGKILL');
  await waitFor(() => started.daemons.every((d) => !alive(d.pid)), 15_000, 100);
  for (const d of started.daemons) {
    expect(await answers(`${d.url}/v1/status/leader`)).toBe(false);
    await expect(stat(d.dataDir)).rejects.toMatchObject({ code: 'ENOENT' });
  }
  return started;
}

describe('watchword/testing', () => {
  it('leaves no daemon and no data dir behind when the process that started the cluster is killed', async () => {
    const { daemons } = await abandonCluster(1);
    expect(daemons).toHaveLength(2);
  }, 60_000);

  it.skipIf(!etcdBinary())(
    'leaves no etcd behind either (a datacenter of several servers)',
    async () => {
      const { daemons, etcd } = await abandonCluster(2);
      expect(daemons).toHaveLength(3);
      const url = (etcd as { url: string }).url;
      let gone = false;
      for (let i = 0; i < 100 && !gone; i++) {
        gone = !(await answers(`${url}/health`));
        if (!gone) await new Promise((r) => setTimeout(r, 100));
      }
      expect(gone).toBe(true);
      // Removed by the orphaned harness once etcd has exited: 20 s, for a loaded machine (the whole suite).
      for (let i = 0; i < 200; i++) {
        try {
          await stat((etcd as { dataDir: string }).dataDir);
        } catch {
          break;
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      await expect(stat((etcd as { dataDir: string }).dataDir)).rejects.toMatchObject({ code: 'ENOENT' });
    },
    60_000,
  );
});
