import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AgentProcess } from './agent-process.js';
import { EtcdProcess, freePort } from './etcd.js';
export { watchwordCommand } from './command.js';
import { LinkGroup, LinkProxy } from './proxy.js';

export { etcdBinary } from './etcd.js';

/**
 * Test harness: real watchword daemons as child processes on ephemeral loopback
 * ports, each with a temp data dir, sharing a known management token.
 *
 *   const cluster = await startCluster({ datacenters: ['dc1', 'dc2'] });
 *   await cluster.primary.client.policies.create({ Name: 'p' });
 *   await cluster.waitForReplication();
 *   await cluster.stop();
 */

export type { Cluster, ClusterOptions, ClusterTLS, CoordinatorHandle, DatacenterHandle, LinkHandle } from './types.js';
import type { Cluster, ClusterOptions, ClusterTLS, CoordinatorHandle, LinkHandle } from './types.js';

class ClusterImpl implements Cluster {
  readonly datacenters: AgentProcess[] = [];
  readonly managementToken: string;
  readonly primaryName: string;

  /** Datacenter names in order, the primary first. */
  readonly names: string[];
  /** Servers per datacenter. */
  readonly serverCounts: Record<string, number>;

  constructor(readonly options: ClusterOptions) {
    const dcs = options.datacenters;
    this.names = Array.isArray(dcs) ? [...dcs] : Object.keys(dcs);
    if (this.names.length === 0) throw new Error('startCluster needs at least one datacenter');
    this.serverCounts = Object.fromEntries(
      this.names.map((n) => [n, Math.max(1, (Array.isArray(dcs) ? undefined : dcs[n]?.servers) ?? options.servers?.[n] ?? 1)]),
    );
    this.managementToken = options.managementToken ?? randomUUID();
    this.primaryName = this.names[0] as string;
  }

  get primary(): AgentProcess {
    return this.datacenters[0] as AgentProcess;
  }

  tls: ClusterTLS | undefined;
  get verifyIncoming(): boolean {
    return typeof this.options.tls === 'object' && this.options.tls.verifyIncoming === true;
  }
  private caKey = '';
  private readonly certificates = new Map<string, { certFile: string; keyFile: string }>();
  private agent: import('undici').Agent | undefined;

  /** Makes the CA and the caller's client certificate. */
  async makeCA(): Promise<void> {
    const dir = await mkdtemp(join(tmpdir(), 'watchword-tls-'));
    const { createCA, createCert } = await import('../transport/certs.js');
    const ca = await createCA({ domain: 'watchword', days: 30 });
    const client = await createCert(ca, { kind: 'client', datacenter: this.primaryName, domain: 'watchword', days: 30 });
    const caFile = join(dir, 'watchword-agent-ca.pem');
    const certFile = join(dir, `${this.primaryName}-client-watchword-0.pem`);
    const keyFile = join(dir, `${this.primaryName}-client-watchword-0-key.pem`);
    await writeFile(caFile, ca.cert);
    await writeFile(certFile, client.cert);
    await writeFile(keyFile, client.key, { mode: 0o600 });
    this.caKey = ca.key;
    this.tls = { dir, caFile, certFile, keyFile, ca: ca.cert, cert: client.cert, key: client.key };
  }

  /** The certificate of one server (server.<dc>.watchword), made on first use and kept across restarts. */
  async serverCertificate(datacenter: string, name: string): Promise<{ certFile: string; keyFile: string; cert: string; key: string }> {
    const tls = this.tls as ClusterTLS;
    const certFile = join(tls.dir, `${name}.pem`);
    const keyFile = join(tls.dir, `${name}-key.pem`);
    if (!this.certificates.has(name)) {
      const { createCert } = await import('../transport/certs.js');
      const issued = await createCert({ cert: tls.ca, key: this.caKey }, { kind: 'server', datacenter, domain: 'watchword', days: 30 });
      await writeFile(certFile, issued.cert);
      await writeFile(keyFile, issued.key, { mode: 0o600 });
      this.certificates.set(name, { certFile, keyFile });
    }
    return { certFile, keyFile, cert: await readFile(certFile, 'utf8'), key: await readFile(keyFile, 'utf8') };
  }

  async renewCertificate(serverName: string): Promise<{ certFile: string; keyFile: string; cert: string }> {
    const tls = this.tls;
    if (!tls) throw new Error('renewCertificate needs a cluster started with tls');
    const datacenter =
      serverName === 'etcd' ? 'etcd' : this.datacenters.find((d) => d.servers.some((s) => s.serverName === serverName))?.name;
    if (!datacenter) throw new Error(`no server ${serverName} in this cluster`);
    const { createCert } = await import('../transport/certs.js');
    const issued = await createCert({ cert: tls.ca, key: this.caKey }, { kind: 'server', datacenter, domain: 'watchword', days: 30 });
    const certFile = join(tls.dir, `${serverName}.pem`);
    const keyFile = join(tls.dir, `${serverName}-key.pem`);
    await writeFile(keyFile, issued.key, { mode: 0o600 });
    await writeFile(certFile, issued.cert);
    this.certificates.set(serverName, { certFile, keyFile });
    return { certFile, keyFile, cert: issued.cert };
  }

  async fetch(url: string, init: RequestInit = {}): Promise<Response> {
    const tls = this.tls;
    if (!tls) return fetch(url, init);
    const undici = await import('undici');
    this.agent ??= new undici.Agent({ connect: { ca: tls.ca, cert: tls.cert, key: tls.key } });
    return undici.fetch(url, { ...(init as object), dispatcher: this.agent }) as unknown as Promise<Response>;
  }

  /** The key the servers of a datacenter prove themselves to each other with (one per datacenter). */
  private readonly serverKeys = new Map<string, string>();

  serverKeyOf(datacenter: string): string {
    let key = this.serverKeys.get(datacenter);
    if (!key) this.serverKeys.set(datacenter, (key = randomBytes(32).toString('base64')));
    return key;
  }

  get(name: string): AgentProcess {
    const d = this.datacenters.find((x) => x.name === name);
    if (!d) throw new Error(`no datacenter ${name} in this cluster`);
    return d;
  }

  readonly proxies = new Map<string, LinkGroup>();

  /** Where a secondary reaches the primary: through its link proxy when there is one; else every primary server. */
  primaryURLFor(secondary: string): string {
    return this.proxies.get(secondary)?.url ?? this.primary.servers.map((s) => s.url).join(',');
  }

  etcd: EtcdProcess | undefined;

  get coordinator(): CoordinatorHandle | undefined {
    const etcd = this.etcd;
    return etcd
      ? { url: etcd.url, peerURL: etcd.peerURL, dataDir: etcd.dataDir, kill: () => etcd.kill(), start: () => etcd.start() }
      : undefined;
  }

  readonly coordinatorProxies = new Map<string, LinkProxy>();

  coordinatorAddressFor(serverName: string): string {
    const proxy = this.coordinatorProxies.get(serverName);
    if (!proxy) throw new Error(`no coordinator link for ${serverName}`);
    return new URL(proxy.url).host;
  }

  coordinatorLink(serverName: string): LinkHandle {
    const proxy = this.coordinatorProxies.get(serverName);
    if (!proxy) throw new Error(`no coordinator link for ${serverName}: it is not a server of a multi-server datacenter`);
    return {
      cut: () => proxy.cutLink(),
      restore: () => proxy.restore(),
      get isCut() {
        return proxy.cut;
      },
    };
  }

  link(secondary: string): LinkHandle {
    const proxy = this.proxies.get(secondary);
    if (!proxy) throw new Error(`no link for ${secondary}: start the cluster with links: true`);
    return {
      cut: () => proxy.cutLink(),
      restore: () => proxy.restore(),
      get isCut() {
        return proxy.cut;
      },
    };
  }

  async waitForReplication(timeoutMs = 30_000): Promise<void> {
    await Promise.all(this.datacenters.filter((d) => !d.isPrimary && d.pid !== undefined).map((d) => d.waitForReplication(timeoutMs)));
  }

  async stop(): Promise<void> {
    const datacenters = this.datacenters.filter((d) => d !== undefined);
    const all = datacenters.flatMap((d) => d.servers);
    for (const d of [...datacenters].reverse()) await Promise.all(d.servers.map((s) => s.stop().catch(() => undefined)));
    for (const p of this.proxies.values()) await p.close();
    for (const p of this.coordinatorProxies.values()) await p.close();
    await this.etcd?.stop();
    // Destroyed, not closed: a response whose body the caller never read must not hold the stop.
    await this.agent?.destroy().catch(() => undefined);
    await Promise.all(all.map((d) => rm(d.dataDir, { recursive: true, force: true })));
    if (this.tls) await rm(this.tls.dir, { recursive: true, force: true });
  }
}

const toFlags = (config: Record<string, string | number> = {}): string[] =>
  Object.entries(config).flatMap(([k, v]) => [`--${k.replaceAll('_', '-')}`, String(v)]);

/** Starts the primary, then every secondary, and waits until each serves HTTP. */
export async function startCluster(options: ClusterOptions): Promise<Cluster> {
  const cluster = new ClusterImpl(options);
  try {
    if (options.tls) await cluster.makeCA();
    if (Object.values(cluster.serverCounts).some((n) => n > 1)) {
      const tls = cluster.tls;
      cluster.etcd = new EtcdProcess(
        tls ? { caFile: tls.caFile, ca: tls.ca, ...(await cluster.serverCertificate('etcd', 'etcd')) } : undefined,
        options.etcdDirParent,
      );
      await cluster.etcd.start();
    }
    // Every datacenter's first port chosen now, when each is to be told the others' addresses.
    const firstPorts = new Map<string, number>();
    if (options.knowEachOther) for (const name of cluster.names) firstPorts.set(name, await freePort());
    const addressesFor = (name: string): Record<string, string> =>
      options.knowEachOther
        ? {
            datacenter_addresses: [...firstPorts]
              .filter(([n]) => n !== name)
              .map(([n, port]) => `${n}=http://127.0.0.1:${port}`)
              .join(','),
          }
        : {};
    // The primary datacenter first (the others need its address), then every secondary at once.
    const startDatacenter = async (i: number, name: string): Promise<void> => {
      const count = cluster.serverCounts[name] as number;
      const fast: Record<string, string> =
        options.timings === 'production' ? {} : { replication_backoff_min: '100ms', replication_backoff_max: '2s' };
      const flags = [...toFlags({ ...fast, ...options.config, ...addressesFor(name) }), ...toFlags(options.configFor?.[name])];
      const group: AgentProcess[] = [];
      for (let k = 0; k < count; k++) {
        const serverName = count > 1 ? `${name}-server-${k + 1}` : `${name}-node`;
        const dir = await mkdtemp(join(options.dataDirParent?.[serverName] ?? tmpdir(), `watchword-${name}-`));
        const server = new AgentProcess(name, i === 0, dir, cluster, flags, serverName);
        server.program = options.programs?.[serverName];
        server.env = options.envFor?.[serverName];
        group.push(server);
      }
      for (const d of group) d.servers = group;
      const d = group[0] as AgentProcess;
      const preset = firstPorts.get(name);
      if (preset !== undefined) d.presetPort(preset);
      cluster.datacenters[i] = d;
      if (i > 0 && options.links) {
        // One proxy per primary server: the secondary follows the primary's leader among them.
        const targets = cluster.primary.servers.map((s) => new URL(s.url)).map((u) => ({ host: u.hostname, port: Number(u.port) }));
        cluster.proxies.set(name, await LinkGroup.open(targets));
      }
      if (count > 1 && cluster.etcd) {
        for (const s of group) {
          const proxy = new LinkProxy({ host: cluster.etcd.host, port: cluster.etcd.port });
          await proxy.listen();
          cluster.coordinatorProxies.set(s.serverName, proxy);
        }
      }
      // Servers of one datacenter start together: none is usable alone before a leader is elected.
      await Promise.all(group.map((s) => s.start()));
      if (count > 1) await d.leader(30_000);
    };
    await startDatacenter(0, cluster.names[0] as string);
    // Settled, not raced: a failure is thrown only once every start has ended, so stop() finds them all.
    const started = await Promise.allSettled(cluster.names.slice(1).map((name, i) => startDatacenter(i + 1, name)));
    const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw failed.reason;
    return cluster;
  } catch (err) {
    await cluster.stop();
    throw err;
  }
}
