import { type ChildProcess, spawn } from 'node:child_process';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { type ReplicationStatusResponse, WatchwordClient } from '../client/index.js';
import { DAEMON_NODE_FLAGS, watchwordCommand } from './command.js';
import type { ClusterOptions, ClusterTLS, DatacenterHandle } from './types.js';

/** What a daemon's handle needs of its cluster. */
export interface DaemonCluster {
  readonly options: ClusterOptions;
  readonly managementToken: string;
  readonly primaryName: string;
  readonly primary: DatacenterHandle;
  readonly tls: ClusterTLS | undefined;
  readonly verifyIncoming: boolean;
  primaryURLFor(secondary: string): string;
  coordinatorAddressFor(serverName: string): string;
  serverKeyOf(datacenter: string): string;
  serverCertificate(datacenter: string, name: string): Promise<{ certFile: string; keyFile: string; cert: string; key: string }>;
  fetch(url: string, init?: RequestInit): Promise<Response>;
}

/** How to run `watchword agent`. */
const agentCommand = (): string[] => [...watchwordCommand(), 'agent'];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined | false>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms${last ? ` (${(last as Error).message})` : ''}`);
    await sleep(50);
  }
}

/** One server of a test cluster: a `watchword agent` child process on a fixed loopback port and temp data dir. */
export class AgentProcess implements DatacenterHandle {
  private proc: ChildProcess | undefined;
  private exited: Promise<number | null> | undefined;
  private out = '';
  private port = 0;
  url = '';
  client!: WatchwordClient;

  servers: AgentProcess[] = [this];
  program: string | undefined;
  env: Record<string, string> | undefined;

  constructor(
    readonly name: string,
    readonly isPrimary: boolean,
    readonly dataDir: string,
    private readonly cluster: DaemonCluster,
    private readonly flags: string[],
    readonly serverName = `${name}-node`,
  ) {}

  async leader(timeoutMs = 15_000): Promise<DatacenterHandle> {
    return until(`a leader in ${this.name}`, timeoutMs, async () => {
      // The server that names itself: another server may still name a leader that was just
      // killed (until its lease lapses), and that one may be running again as a follower.
      for (const s of this.servers) {
        if (s.pid === undefined) continue;
        try {
          const res = await this.cluster.fetch(`${s.url}/v1/status/leader`, { signal: AbortSignal.timeout(1000) });
          if ((await res.json()) === new URL(s.url).host) return s;
        } catch {
          // ask the next one
        }
      }
      return undefined;
    });
  }

  get pid(): number | undefined {
    const p = this.proc;
    return p && p.exitCode === null && p.signalCode === null ? p.pid : undefined;
  }

  output(): string {
    return this.out;
  }

  /** The port to listen on from its first start (known to the others before it starts). */
  presetPort(port: number): void {
    this.port = port;
    this.url = `http://127.0.0.1:${port}`;
  }

  async start(): Promise<void> {
    if (this.pid !== undefined) throw new Error(`${this.name} is already running`);
    await rm(join(this.dataDir, 'http-addr'), { force: true });
    const tls = this.cluster.tls;
    const cert = tls ? await this.cluster.serverCertificate(this.name, this.serverName) : undefined;
    const args = [
      ...(this.program === undefined ? agentCommand() : [...DAEMON_NODE_FLAGS, this.program, 'agent']),
      '--datacenter',
      this.name,
      '--primary-datacenter',
      this.cluster.primaryName,
      '--data-dir',
      this.dataDir,
      '--http-addr',
      `127.0.0.1:${this.port}`,
      '--log-level',
      this.cluster.options.logLevel ?? 'warn',
      '--node-name',
      this.serverName,
      ...(this.isPrimary
        ? ['--initial-management-token', this.cluster.managementToken]
        : ['--primary-address', this.cluster.primaryURLFor(this.name), '--replication-token', this.cluster.managementToken]),
      ...(this.servers.length > 1
        ? [
            '--coordinator',
            `${tls ? 'etcds' : 'etcd'}://${this.cluster.coordinatorAddressFor(this.serverName)}`,
            '--server-key',
            this.cluster.serverKeyOf(this.name),
            ...(tls && cert ? ['--etcd-ca-file', tls.caFile, '--etcd-cert-file', cert.certFile, '--etcd-key-file', cert.keyFile] : []),
          ]
        : []),
      ...(tls && cert
        ? [
            '--tls-ca-file',
            tls.caFile,
            '--tls-cert-file',
            cert.certFile,
            '--tls-key-file',
            cert.keyFile,
            ...(this.cluster.verifyIncoming ? ['--tls-verify-incoming', 'true'] : []),
          ]
        : []),
      ...this.flags,
    ];
    const env = { ...process.env };
    // Not npm's child either (a test run under `npm test` would otherwise pass that on).
    for (const k of Object.keys(env)) if (k.startsWith('WATCHWORD_') || k.startsWith('npm_')) delete env[k];
    // The daemon lives only as long as this process: should it die before stop() (an
    // exception, SIGKILL), its daemons stop too and remove their temp data dirs.
    env.WATCHWORD_LIFELINE = 'stdin';
    env.WATCHWORD_LIFELINE_REMOVE_DATA = '1';
    Object.assign(env, this.env);
    const proc = spawn(process.execPath, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
    this.proc = proc;
    this.exited = new Promise((resolve) => proc.once('exit', (code) => resolve(code)));
    proc.stdout?.on('data', (b: Buffer) => (this.out += b.toString()));
    proc.stderr?.on('data', (b: Buffer) => (this.out += b.toString()));
    const address = await until(`${this.name} to start`, this.cluster.options.startTimeoutMs ?? 30_000, async () => {
      if (proc.exitCode !== null || proc.signalCode !== null)
        throw new Error(`exited with ${proc.exitCode ?? proc.signalCode}: ${this.out.slice(-2000)}`);
      try {
        return (await readFile(join(this.dataDir, 'http-addr'), 'utf8')).trim() || undefined;
      } catch {
        return undefined;
      }
    });
    this.port = Number(address.slice(address.lastIndexOf(':') + 1));
    this.url = `${tls ? 'https' : 'http'}://${address}`;
    this.client = new WatchwordClient({
      address: this.url,
      token: this.cluster.managementToken,
      ...(tls ? { tls: { ca: tls.ca, cert: tls.cert, key: tls.key } } : {}),
    });
  }

  async stop(): Promise<number | null> {
    if (this.pid === undefined) return this.proc?.exitCode ?? null;
    this.proc?.kill('SIGTERM');
    return (await this.exited) ?? null;
  }

  async kill(): Promise<void> {
    if (this.pid === undefined) return;
    this.proc?.kill('SIGKILL');
    await this.exited;
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  replication(): Promise<ReplicationStatusResponse> {
    return this.client.replication();
  }

  async waitForReplication(timeoutMs = 30_000): Promise<void> {
    if (this.isPrimary) return;
    const primary = this.cluster.primary.servers.find((s) => s.pid !== undefined) ?? this.cluster.primary;
    const target = (await primary.client.agent.index()).Index;
    await until(`${this.name} to replicate index ${target}`, timeoutMs, async () => {
      const s = await this.replication();
      return s.Connected && s.ReplicatedIndex >= target ? true : undefined;
    });
    // Several servers: the leader replicated it (any server reports the leader's status); every running server has it too.
    const running = this.servers.filter((s) => s.pid !== undefined);
    if (running.length > 1) {
      const leader = await this.leader(timeoutMs);
      const local = (await leader.client.agent.index()).Index;
      await until(`every server of ${this.name} to apply index ${local}`, timeoutMs, async () => {
        const indexes = await Promise.all(running.map(async (s) => (await s.client.agent.index()).Index));
        return indexes.every((i) => i >= local) ? true : undefined;
      });
    }
  }
}
