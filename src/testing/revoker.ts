import type { Cluster, DatacenterHandle } from './index.js';
import { call, sleep } from './chaos.js';

export interface Revocation {
  datacenter: string;
  /** From the primary's acknowledgement of the delete to the first 403 at a server of this datacenter. */
  ms: number;
  /** What was going on when the delete was acknowledged: a fault, 'load' (writes, no fault), or undefined at rest (neither). */
  during: string | undefined;
}

/** The servers of a datacenter that are running. */
export const running = (d: DatacenterHandle): DatacenterHandle[] => d.servers.filter((s) => s.pid !== undefined);

/**
 * Deletes tokens at the primary while a reader in every datacenter keeps using each, and
 * records the time from the delete's acknowledgement to the first 403 in each datacenter.
 */
export class Revoker {
  readonly revocations: Revocation[] = [];
  readonly missed: string[] = [];
  fault: string | undefined;
  private active = false;
  private worker: Promise<void> | undefined;
  private turn = 0;

  constructor(
    private readonly cluster: Cluster,
    private readonly token: string,
    private readonly datacenters: readonly string[],
  ) {}

  private server(dc: string): DatacenterHandle {
    const servers = running(this.cluster.get(dc));
    return servers[this.turn++ % Math.max(1, servers.length)] ?? this.cluster.get(dc);
  }

  start(): void {
    this.active = true;
    this.worker = (async () => {
      while (this.active) {
        await this.once();
        await sleep(200);
      }
    })();
  }

  async stop(): Promise<void> {
    this.active = false;
    await this.worker;
  }

  private async once(): Promise<void> {
    const made = await call(this.server('dc1').url, this.token, 'PUT', '/v1/acl/token', { Description: 'revoked' });
    if (made.status !== 200) return;
    const t = made.body as { SecretID: string; AccessorID: string };
    // Readers: one server of each datacenter, once the token works there.
    const readers = this.datacenters.map((dc) => ({ dc, server: this.server(dc) }));
    for (const r of readers) {
      const deadline = Date.now() + 10_000;
      while ((await call(r.server.url, t.SecretID, 'GET', '/v1/acl/token/self', undefined, 2000)).status !== 200) {
        if (Date.now() > deadline || !this.active) return;
        await sleep(20);
      }
    }
    const during = this.fault;
    const deleted = await call(this.server('dc1').url, this.token, 'DELETE', `/v1/acl/token/${t.AccessorID}`);
    if (deleted.status !== 200 || deleted.body !== true) return;
    const ackAt = Date.now();
    await Promise.all(
      readers.map(async (r) => {
        for (;;) {
          const a = await call(r.server.url, t.SecretID, 'GET', '/v1/acl/token/self', undefined, 2000);
          if (a.status === 403) {
            this.revocations.push({ datacenter: r.dc, ms: Date.now() - ackAt, during: during ?? this.fault });
            return;
          }
          if (Date.now() - ackAt > 30_000) {
            this.missed.push(`${t.AccessorID} still honoured at ${r.server.serverName} 30 s after its delete`);
            return;
          }
          await sleep(5);
        }
      }),
    );
  }
}
