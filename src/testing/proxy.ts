import net from 'node:net';

/**
 * A TCP proxy on a loopback port in front of another address: the link between two
 * daemons, which a test can cut (every open connection reset, new ones refused) and
 * restore, to partition a cluster without touching the daemons.
 */
export class LinkProxy {
  private readonly server: net.Server;
  private readonly open = new Set<net.Socket>();
  private isCut = false;
  port = 0;

  constructor(private readonly target: { host: string; port: number }) {
    this.server = net.createServer((client) => this.accept(client));
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, '127.0.0.1', () => resolve());
    });
    const a = this.server.address();
    this.port = typeof a === 'object' && a ? a.port : 0;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get cut(): boolean {
    return this.isCut;
  }

  private accept(client: net.Socket): void {
    if (this.isCut) {
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(this.target.port, this.target.host);
    for (const s of [client, upstream]) {
      this.open.add(s);
      s.setNoDelay(true);
      s.on('error', () => undefined);
      s.once('close', () => {
        this.open.delete(s);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  }

  /** Partitions the link: open connections are reset and new ones refused until restore(). */
  cutLink(): void {
    this.isCut = true;
    for (const s of this.open) s.resetAndDestroy();
    this.open.clear();
  }

  restore(): void {
    this.isCut = false;
  }

  async close(): Promise<void> {
    this.cutLink();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/**
 * The link from a secondary to a primary datacenter of several servers: one proxy per server
 * (the secondary is given all of them, as an operator lists every primary server), cut and
 * restored together.
 */
export class LinkGroup {
  constructor(readonly proxies: LinkProxy[]) {}

  static async open(targets: Array<{ host: string; port: number }>): Promise<LinkGroup> {
    const proxies = targets.map((t) => new LinkProxy(t));
    await Promise.all(proxies.map((p) => p.listen()));
    return new LinkGroup(proxies);
  }

  /** Every proxy's URL, comma-separated (a primary_address list). */
  get url(): string {
    return this.proxies.map((p) => p.url).join(',');
  }

  get cut(): boolean {
    return this.proxies.every((p) => p.cut);
  }

  cutLink(): void {
    for (const p of this.proxies) p.cutLink();
  }

  restore(): void {
    for (const p of this.proxies) p.restore();
  }

  async close(): Promise<void> {
    await Promise.all(this.proxies.map((p) => p.close()));
  }
}
