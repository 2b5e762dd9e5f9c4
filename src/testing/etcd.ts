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

/** A TCP port free on 127.0.0.1 right now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/**
 * Runs etcd (argv: binary, data dir, etcd's arguments) for as long as its starter lives:
 * when the starter's end of our stdin closes (it exited, or was SIGKILLed), etcd is
 * killed and its data dir removed (also when etcd dies first, of its logs' broken pipe).
 * SIGTERM is passed on for a clean stop; SIGUSR2 becomes a SIGKILL of etcd itself (a crash
 * that keeps the data dir, for restart tests).
 */
const LIFELINE = `
const { spawn } = require('node:child_process');
const { rmSync } = require('node:fs');
const [bin, dir, ...args] = process.argv.slice(1);
const starter = process.ppid;
const etcd = spawn(bin, args, { stdio: ['ignore', 'inherit', 'inherit'] });
let abandoned = false;
const lost = () => { abandoned = true; etcd.kill('SIGKILL'); };
process.stdin.on('end', lost);
process.stdin.on('error', lost);
process.stdin.resume();
process.on('SIGTERM', () => etcd.kill('SIGTERM'));
process.on('SIGUSR2', () => etcd.kill('SIGKILL'));
etcd.on('exit', (code) => {
  // The starter's death may reach etcd first (its logs' pipe breaks) and our stdin's end after:
  // a starter that has gone (this process re-parented) counts as abandoned too.
  if (abandoned || process.ppid !== starter) rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
  process.exit(code ?? 0);
});
`;

/** A certificate, its key and the CA, as files and as PEM text (etcd's own, over TLS; or a cluster's client's). */
export interface EtcdTLS {
  caFile: string;
  certFile: string;
  keyFile: string;
  /** PEM texts of the same, for the health check. */
  ca: string;
  cert: string;
  key: string;
}

/** A single-member etcd on loopback, in a temp dir, for a test cluster's leader elections; it dies with the process that started it. */
export class EtcdProcess {
  /** With `tls`, etcd speaks only TLS on both its ports and requires client certificates (--client-cert-auth). */
  constructor(
    private readonly tls?: EtcdTLS,
    /** Where its temp data dir is made (a LazyFS mount for power cuts); the system's temp dir by default. */
    private readonly parent?: string,
  ) {}

  private proc: ChildProcess | undefined;
  private exited: Promise<void> | undefined;
  private dir = '';
  private out = '';
  host = '127.0.0.1';
  port = 0;
  private peerPort = 0;

  get url(): string {
    return `${this.tls ? 'https' : 'http'}://${this.host}:${this.port}`;
  }

  get peerURL(): string {
    return `${this.tls ? 'https' : 'http'}://${this.host}:${this.peerPort}`;
  }

  output(): string {
    return this.out;
  }

  /** The data dir (removed on stop, or when the starter dies). */
  get dataDir(): string {
    return this.dir;
  }

  /** Whether etcd is running now. */
  get running(): boolean {
    return this.proc !== undefined && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /**
   * Starts etcd; after kill(), again on the same data dir and ports. A first start whose
   * ports another process took between choosing and binding them tries fresh ports.
   */
  async start(timeoutMs = 20_000): Promise<void> {
    const bin = etcdBinary();
    if (!bin) throw new Error('etcd is not installed (Debian: apt-get install etcd-server)');
    if (this.running) return;
    if (this.dir) return this.launch(bin, timeoutMs);
    this.dir = await mkdtemp(join(this.parent ?? tmpdir(), 'watchword-etcd-'));
    for (let attempt = 1; ; attempt++) {
      this.port = await freePort();
      this.peerPort = await freePort();
      try {
        return await this.launch(bin, timeoutMs);
      } catch (err) {
        // A first start on LazyFS (power-cut tests) now and then finds its new WAL file gone ("000…0.wal: no such file or
        // directory") as etcd renames the directory it was made in: a fresh data dir again then, as for a port taken.
        if (attempt >= 5 || !/address already in use|\.wal: no such file or directory/.test(this.out)) throw err;
        await rm(join(this.dir, 'data'), { recursive: true, force: true });
        this.out = '';
      }
    }
  }

  private async launch(bin: string, timeoutMs: number): Promise<void> {
    const peer = this.peerPort;
    const tls = this.tls;
    const scheme = tls ? 'https' : 'http';
    const proc = spawn(
      process.execPath,
      [
        '-e',
        LIFELINE,
        '--',
        bin,
        this.dir,
        '--name',
        'watchword-test',
        '--data-dir',
        join(this.dir, 'data'),
        '--listen-client-urls',
        this.url,
        '--advertise-client-urls',
        this.url,
        '--listen-peer-urls',
        `${scheme}://127.0.0.1:${peer}`,
        '--initial-advertise-peer-urls',
        `${scheme}://127.0.0.1:${peer}`,
        '--initial-cluster',
        `watchword-test=${scheme}://127.0.0.1:${peer}`,
        '--log-level',
        'error',
        ...(tls
          ? [
              '--cert-file',
              tls.certFile,
              '--key-file',
              tls.keyFile,
              '--trusted-ca-file',
              tls.caFile,
              '--client-cert-auth',
              '--peer-cert-file',
              tls.certFile,
              '--peer-key-file',
              tls.keyFile,
              '--peer-trusted-ca-file',
              tls.caFile,
              '--peer-client-cert-auth',
            ]
          : []),
      ],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    this.proc = proc;
    this.exited = new Promise((resolve) => proc.once('exit', () => resolve()));
    proc.stdout?.on('data', (b: Buffer) => (this.out += b.toString()));
    proc.stderr?.on('data', (b: Buffer) => (this.out += b.toString()));
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`etcd exited with ${proc.exitCode}: ${this.out.slice(-1000)}`);
      try {
        const res = await this.fetch(`${this.url}/health`);
        if (res.ok && ((await res.json()) as { health?: string }).health === 'true') return;
      } catch {
        // not yet
      }
      if (Date.now() > deadline) throw new Error(`etcd did not become healthy within ${timeoutMs} ms: ${this.out.slice(-1000)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** SIGKILL of etcd (a crash); its data dir stays for start(). */
  async kill(): Promise<void> {
    if (!this.running) return;
    this.proc?.kill('SIGUSR2');
    await this.exited;
  }

  /** GET on etcd's HTTP endpoint (with the client certificate when over TLS). */
  private async fetch(url: string): Promise<Response> {
    if (!this.tls) return fetch(url, { signal: AbortSignal.timeout(1000) });
    const { Agent, fetch: tlsFetch } = await import('undici');
    this.agent ??= new Agent({ connect: { ca: this.tls.ca, cert: this.tls.cert, key: this.tls.key } });
    return tlsFetch(url, { dispatcher: this.agent, signal: AbortSignal.timeout(1000) }) as unknown as Promise<Response>;
  }

  private agent: import('undici').Agent | undefined;

  async stop(): Promise<void> {
    await this.agent?.destroy().catch(() => undefined);
    this.agent = undefined;
    if (this.proc && this.proc.exitCode === null) {
      this.proc.kill('SIGTERM');
      await this.exited;
    }
    if (this.dir) await rm(this.dir, { recursive: true, force: true });
  }
}
