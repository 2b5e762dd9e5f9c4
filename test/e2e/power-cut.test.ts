import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { etcdBinary } from '../../src/testing/etcd.js';
import { startCluster } from '../../src/testing/index.js';
import { LazyFS, lazyfsUnavailable, MOUNT_WAIT_MS } from '../../src/testing/lazyfs.js';
import { type AgentProcess, spawnAgent } from '../helpers/process.js';
import { type Api, apiFor } from '../helpers/test-daemon.js';

// Power cuts (docs/datacenters.md, last item): a daemon's data dir on LazyFS, which keeps what is written in
// its own cache until fsync; SIGKILL, then LazyFS drops every byte never synced, as a machine
// losing power would. After each restart every acknowledged write and delete must be in place.
// The moments: under write load while the enforced audit log rotates, during a clean stop's
// checkpoint, during a restore's swap of a staged store, and a whole HA datacenter with its etcd.

const unavailable = lazyfsUnavailable();
if (unavailable) console.warn(`skipped: ${unavailable}`);

const SECRET = 'power-cut-management-secret';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** A moment of the run, the same from run to run for a seed (printed on failure). */
const seed = Number(process.env.WATCHWORD_POWER_CUT_SEED ?? Date.now() % 100_000);
let state = seed;
const random = (): number => {
  state = (state * 1103515245 + 12345) % 2 ** 31;
  return state / 2 ** 31;
};

/** What clients were told: tokens whose create answered 200, and those whose delete did (an unanswered one is neither). */
interface Told {
  created: Set<string>;
  deleted: Set<string>;
  /** Creates acknowledged so far (a count that only grows: `created` loses a token while its delete is under way). */
  acknowledged: number;
}

/** Creates tokens (and deletes a few of them) from `workers` clients until `stop()`; records every acknowledgement. */
function writeLoad(api: () => Api, workers = 8): { told: Told; stop(): Promise<void> } {
  const told: Told = { created: new Set(), deleted: new Set(), acknowledged: 0 };
  let going = true;
  const worker = async (w: number) => {
    for (let i = 0; going && i < 100_000; i++) {
      try {
        if (i % 5 === 4 && told.created.size > 0) {
          const victim = [...told.created][Math.floor(random() * told.created.size)] as string;
          told.created.delete(victim);
          const res = await api()('DELETE', `/v1/acl/token/${victim}`);
          if (res.status === 200) told.deleted.add(victim);
          continue;
        }
        const id = randomUUID();
        const res = await api()('PUT', '/v1/acl/token', { body: { AccessorID: id, Description: `load ${w}-${i}` } });
        if (res.status === 200) {
          told.created.add(id);
          told.acknowledged++;
        }
      } catch {
        // The connection was cut by the kill: no answer, no promise.
        await sleep(5);
      }
    }
  };
  const running = Promise.all(Array.from({ length: workers }, (_, w) => worker(w)));
  return {
    told,
    async stop() {
      going = false;
      await running;
    },
  };
}

/** Waits until the load has `n` acknowledged creates (a busy machine is slower; at most `maxMs`), then `thenMs` more. */
async function loadFor(told: Told, n: number, thenMs: number, maxMs = 15_000): Promise<void> {
  const deadline = Date.now() + maxMs;
  while (told.acknowledged < n && Date.now() < deadline) await sleep(20);
  await sleep(thenMs);
}

/** Tokens named by token-create and token-delete lines of the audit log's changes file and the files it rotated to. */
async function auditedTokens(auditDir: string): Promise<Set<string>> {
  let text = '';
  for (const f of await readdir(auditDir)) if (f.startsWith('audit-changes.log')) text += await readFile(join(auditDir, f), 'utf8');
  const audited = new Set<string>();
  for (const line of text.split('\n')) {
    if (!line) continue;
    const event = JSON.parse(line) as { Type?: string; Objects?: Array<{ ID: string }> };
    if (event.Type === 'token-create' || event.Type === 'token-delete') for (const o of event.Objects ?? []) audited.add(o.ID);
  }
  return audited;
}

/** Every token acknowledged is there, every acknowledged delete is gone: the names of any that are not. */
async function missing(api: Api, told: Told): Promise<{ lost: string[]; back: string[] }> {
  const held = new Set(((await api('GET', '/v1/acl/tokens')).body as Array<{ AccessorID: string }>).map((t) => t.AccessorID));
  return { lost: [...told.created].filter((id) => !held.has(id)), back: [...told.deleted].filter((id) => held.has(id)) };
}

describe.skipIf(unavailable !== undefined)(`power cuts on LazyFS (seed ${seed})`, () => {
  let fs: LazyFS;
  let root = '';
  let agent: AgentProcess | undefined;
  let n = 0;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'watchword-power-cut-'));
    fs = await LazyFS.mount(root);
  }, MOUNT_WAIT_MS + 10_000);
  afterAll(async () => {
    if (agent?.proc.exitCode === null && agent.proc.signalCode === null) await agent.kill();
    await fs?.unmount();
    await rm(root, { recursive: true, force: true });
  });

  /** A fresh data dir on the mount. */
  const dataDir = async (): Promise<string> => {
    const dir = join(fs.dir, `dc-${++n}`);
    await mkdir(dir, { recursive: true });
    return dir;
  };
  const start = async (dir: string, flags: string[] = []) => {
    agent = await spawnAgent(dir, [
      '--initial-management-token',
      SECRET,
      ...(process.env.WATCHWORD_POWER_CUT_FLAGS?.split(' ') ?? []),
      ...flags,
    ]);
    return apiFor(agent.url, SECRET);
  };
  /** SIGKILL, then the power cut: what was not synced is gone. */
  const powerCut = async () => {
    await agent?.kill();
    await fs.clearCache();
  };

  it('under write load, while the enforced audit log rotates, at random moments: every acknowledged write, delete and audit line survives', async () => {
    const dir = await dataDir();
    // The audit log enforced (a change is acknowledged only once its line is durable) and rotated every 16 KB.
    const flags = ['--audit-log-mode', 'enforced', '--audit-log-rotate-bytes', '16384', '--audit-log-rotate-max-files', '1000'];
    let api = await start(dir, flags);
    const all: Told = { created: new Set(), deleted: new Set(), acknowledged: 0 };
    for (let round = 0; round < 2; round++) {
      const load = writeLoad(() => api);
      await loadFor(load.told, 40, random() * 800);
      await powerCut();
      await load.stop();
      all.acknowledged += load.told.acknowledged;
      for (const id of load.told.created) all.created.add(id);
      for (const id of load.told.deleted) {
        all.created.delete(id);
        all.deleted.add(id);
      }
      api = await start(dir, flags);
      expect(await missing(api, all), `round ${round}`).toEqual({ lost: [], back: [] });
    }
    // Each acknowledged change is in the changes file or one it rotated to.
    expect(await readdir(join(dir, 'audit')), 'the changes file rotated').toContain('audit-changes.log.1');
    const audited = await auditedTokens(join(dir, 'audit'));
    expect([...all.created, ...all.deleted].filter((id) => !audited.has(id))).toEqual([]);
    expect(all.acknowledged).toBeGreaterThanOrEqual(80);
    expect(all.deleted.size).toBeGreaterThanOrEqual(5);
    await agent?.stop();
  }, 60_000);

  it("during a clean stop's checkpoint: the next start finds everything, from the checkpoint or the scan", async () => {
    const dir = await dataDir();
    let api = await start(dir);
    const load = writeLoad(() => api, 16);
    await loadFor(load.told, 300, 0);
    await load.stop();
    // The stop writes the checkpoint (tokens as held in memory, beside LevelDB); the power goes somewhere in it.
    agent?.proc.kill('SIGTERM');
    await sleep(random() * 150);
    await powerCut();
    api = await start(dir);
    expect(await missing(api, load.told)).toEqual({ lost: [], back: [] });
    await agent?.stop();
  }, 60_000);

  it("during a restore's swap of a staged store: the old state whole, or (once acknowledged) the snapshot's", async () => {
    const dir = await dataDir();
    let api = await start(dir);
    const before = writeLoad(() => api, 16);
    await loadFor(before.told, 200, 0);
    await before.stop();
    const snapshot = await fetch(`${agent?.url}/v1/snapshot`, { headers: { 'X-Service-Token': SECRET } });
    expect(snapshot.status).toBe(200);
    const bytes = Buffer.from(await snapshot.arrayBuffer());
    const after = writeLoad(() => api, 8);
    await loadFor(after.told, 20, 0);
    await after.stop();
    // The restore, with the power cut at a random moment of it.
    const restore = fetch(`${agent?.url}/v1/snapshot`, { method: 'PUT', headers: { 'X-Service-Token': SECRET }, body: bytes }).then(
      (r) => r.status,
      () => 0,
    );
    await sleep(random() * 120);
    await powerCut();
    const status = await restore;
    api = await start(dir);
    const old = await missing(api, after.told);
    const held = await missing(api, before.told);
    expect(held.lost, 'what the snapshot holds').toEqual([]);
    if (status === 200) {
      // Acknowledged: the snapshot's state, so none of the writes made after it.
      expect(old.lost.length).toBe(after.told.created.size);
    } else {
      // Not acknowledged: one state or the other, whole.
      expect([0, after.told.created.size]).toContain(old.lost.length);
    }
    await agent?.stop();
  }, 60_000);

  it.skipIf(!etcdBinary())(
    'an HA datacenter (three servers and etcd, every data dir on LazyFS), all cut at once under load: nothing acknowledged is lost',
    async () => {
      const parent = await dataDir();
      const names = ['dc1-server-1', 'dc1-server-2', 'dc1-server-3'];
      const cluster = await startCluster({
        datacenters: { dc1: { servers: 3 } },
        managementToken: SECRET,
        dataDirParent: Object.fromEntries(names.map((n) => [n, parent])),
        etcdDirParent: parent,
      });
      try {
        const servers = cluster.get('dc1').servers;
        const leader = await cluster.get('dc1').leader();
        // Writes at every server (followers forward them to the leader).
        let k = 0;
        const load = writeLoad(() => apiFor(servers[k++ % servers.length]?.url as string, SECRET), 12);
        await loadFor(load.told, 30, random() * 800);
        // The power goes in the whole datacenter: etcd and every server at once.
        await Promise.all([...servers.map((x) => x.kill()), cluster.coordinator?.kill()]);
        await fs.clearCache();
        await load.stop();
        await cluster.coordinator?.start();
        await Promise.all(servers.map((x) => x.start()));
        const next = await cluster.get('dc1').leader(30_000);
        expect(load.told.acknowledged).toBeGreaterThanOrEqual(30);
        expect(await missing(apiFor(next.url, SECRET), load.told), `leader before: ${leader.serverName}`).toEqual({ lost: [], back: [] });
      } finally {
        await cluster.stop();
      }
    },
    90_000,
  );
});
