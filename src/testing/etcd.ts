import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Path of the etcd binary (Debian's etcd-server package), or undefined when it is not installed. */
export function etcdBinary(): string | undefined {
  for (const candidate of [process.env.WATCHWORD_ETCD_BIN, '/usr/bin/etcd', '/usr/local/bin/etcd']) {
    if (!candidate) continue;
    try {
      execFileSync(candidate, ['--version'], { stdio: 'ignore' });
      return candidate;
    } catch {
      // not this one
    }
  }
  return undefined;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** A single-member etcd on loopback, in a temp dir, for a test cluster's leader elections. */
export class EtcdProcess {
  private proc: ChildProcess | undefined;
  private exited: Promise<void> | undefined;
  private dir = '';
  private out = '';
  host = '127.0.0.1';
  port = 0;

  get url(): string {
    return `http://${this.host}:${this.port}`;
  }

  output(): string {
    return this.out;
  }

  async start(timeoutMs = 20_000): Promise<void> {
    const bin = etcdBinary();
    if (!bin) throw new Error('etcd is not installed (Debian: apt-get install etcd-server)');
    this.dir = await mkdtemp(join(tmpdir(), 'watchword-etcd-'));
    this.port = await freePort();
    const peer = await freePort();
    const proc = spawn(
      bin,
      [
        '--name', 'watchword-test',
        '--data-dir', join(this.dir, 'data'),
        '--listen-client-urls', this.url,
        '--advertise-client-urls', this.url,
        '--listen-peer-urls', `http://127.0.0.1:${peer}`,
        '--initial-advertise-peer-urls', `http://127.0.0.1:${peer}`,
        '--initial-cluster', `watchword-test=http://127.0.0.1:${peer}`,
        '--log-level', 'error',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    this.proc = proc;
    this.exited = new Promise((resolve) => proc.once('exit', () => resolve()));
    proc.stdout?.on('data', (b: Buffer) => (this.out += b.toString()));
    proc.stderr?.on('data', (b: Buffer) => (this.out += b.toString()));
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`etcd exited with ${proc.exitCode}: ${this.out.slice(-1000)}`);
      try {
        const res = await fetch(`${this.url}/health`, { signal: AbortSignal.timeout(1000) });
        if (res.ok && ((await res.json()) as { health?: string }).health === 'true') return;
      } catch {
        // not yet
      }
      if (Date.now() > deadline) throw new Error(`etcd did not become healthy within ${timeoutMs} ms: ${this.out.slice(-1000)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async stop(): Promise<void> {
    if (this.proc && this.proc.exitCode === null) {
      this.proc.kill('SIGTERM');
      await this.exited;
    }
    if (this.dir) await rm(this.dir, { recursive: true, force: true });
  }
}
