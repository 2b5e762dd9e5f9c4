import { execFile } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { watchwordCommand } from '../../src/testing/command.js';
import { WebSocket } from 'ws';
import { runFailover } from '../../src/testing/failover.js';
import { ServerKeyProof } from '../../src/transport/server-key.js';
import { serverCall as call } from '../helpers/cluster.js';
import { type Cluster, type DatacenterHandle, etcdBinary, startCluster } from '../../src/testing/index.js';
import { until } from '../helpers/test-daemon.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const etcd = etcdBinary();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(!etcd)('several servers per datacenter (etcd-coordinated)', () => {
  let cluster: Cluster;
  let token: string;
  /** A token used at a follower (the test of followers' reads): its last use must outlive the failovers. */
  let usedAtFollower: string | undefined;
  let usedAtFollowerShown: unknown;

  beforeAll(async () => {
    // A 3 s lease (not the default 5 s): failovers here are checked against the 10 s bound, not timed for a report.
    cluster = await startCluster({
      datacenters: { dc1: { servers: 3 }, dc2: { servers: 1 } },
      // Info: a failure's diagnostics quote what each server logged of the election and the synchronous set.
      logLevel: 'info',
      // Last uses written often: a use seen at a follower or at dc2 reaches the leader's disk within a second or two.
      config: { leader_lease: '3s', last_used_flush: '300ms' },
    });
    token = cluster.managementToken;
    await cluster.waitForReplication();
  }, 90_000);

  afterAll(async () => {
    await cluster?.stop();
  }, 60_000);

  it('names one leader, lists the servers, and keeps a follower in the synchronous set', async () => {
    const dc1 = cluster.get('dc1');
    const leader = await dc1.leader();
    for (const s of dc1.servers) {
      const l = await call(s, token, 'GET', '/v1/status/leader');
      expect(l.body).toBe(new URL(leader.url).host);
      const peers = (await fetch(`${s.url}/v1/status/peers`).then((r) => r.json())) as string[];
      expect(peers.sort()).toEqual(dc1.servers.map((x) => new URL(x.url).host).sort());
    }
    await until(
      'a synchronous follower',
      10_000,
      async () => ((await call(leader, token, 'GET', '/v1/operator/servers')).body?.SyncSet as string[] | undefined)?.length === 1,
    );
    const view = (await call(leader, token, 'GET', '/v1/operator/servers')).body as {
      Servers: Array<{ Role: string; InSyncSet: boolean }>;
      RunningWithoutSyncCopy: boolean;
    };
    expect(view.Servers.map((s) => s.Role).sort()).toEqual(['follower', 'follower', 'leader']);
    expect(view.RunningWithoutSyncCopy).toBe(false);
    expect((await fetch(`${leader.url}/v1/operator/servers`)).status).toBe(403);
  });

  it("every server answers /v1/operator/servers with the leader's view, a killed server listed as down", async () => {
    const dc1 = cluster.get('dc1');
    const leader = await dc1.leader();
    const [dead, alive] = dc1.servers.filter((s) => s !== leader) as [DatacenterHandle, DatacenterHandle];
    type View = {
      AnsweredBy: string;
      Leader: string;
      Servers: Array<{ Name: string; Registered: boolean; Connected: boolean; Role: string }>;
    };
    const view = async (s: DatacenterHandle) => (await call(s, token, 'GET', '/v1/operator/servers')).body as unknown as View;
    await dead.kill();
    onTestFinished(async () => {
      if (
        !(await fetch(`${dead.url}/v1/status/leader`).then(
          () => true,
          () => false,
        ))
      )
        await dead.start();
    });
    // The killed server's registration lapses with its lease (3 s here); then the leader lists it as down.
    await until(
      'the killed server listed as down',
      15_000,
      async () => (await view(leader)).Servers.find((x) => x.Name === dead.serverName)?.Registered === false,
    );
    const fromLeader = await view(leader);
    const fromFollower = await view(alive);
    expect(fromFollower.AnsweredBy).toBe(leader.serverName);
    expect(fromLeader.AnsweredBy).toBe(leader.serverName);
    const rows = (v: View) => v.Servers.map((x) => `${x.Name} ${x.Role} ${x.Registered ? 'up' : 'down'}`);
    expect(rows(fromFollower)).toEqual(rows(fromLeader));
    expect(fromLeader.Servers.map((x) => x.Name).sort()).toEqual(dc1.servers.map((x) => x.serverName).sort());
    expect(fromLeader.Servers.find((x) => x.Name === dead.serverName)).toMatchObject({ Registered: false, Connected: false });
    await dead.start();
    await until(
      'the restarted server listed as up',
      20_000,
      async () => (await view(alive)).Servers.find((x) => x.Name === dead.serverName)?.Registered === true,
    );
    await until(
      'a synchronous follower again',
      20_000,
      async () => ((await call(leader, token, 'GET', '/v1/operator/servers')).body?.SyncSet as string[] | undefined)?.length === 1,
    );
    // The next tests take any follower for one that streams: the restarted one must be back on its stream.
    await until(
      'the restarted server streaming again',
      20_000,
      async () => (await view(leader)).Servers.find((x) => x.Name === dead.serverName)?.Connected === true,
    );
  }, 60_000);

  it('an ACL token, even with acl = "write", opens no servers\' stream and receives no frame; nobody can take a live server\'s name or stream as an unknown server', async () => {
    const dc1 = cluster.get('dc1');
    const leader = await dc1.leader();
    const follower = dc1.servers.find((s) => s !== leader) as DatacenterHandle;
    const policy = await call(leader, token, 'PUT', '/v1/acl/policy', {
      Name: `acl-writer-${randomUUID().slice(0, 8)}`,
      Rules: 'acl = "write"',
    });
    const writer = await call(leader, token, 'PUT', '/v1/acl/token', { Policies: [{ ID: policy.body?.ID }] });
    const secret = writer.body?.SecretID as string;
    const attempt = (headers: Record<string, string>) =>
      new Promise<{ status: number; body: string; frames: number }>((resolve) => {
        const ws = new WebSocket(`${leader.url.replace('http', 'ws')}/v1/internal/servers?version=2`, { headers });
        let frames = 0;
        ws.on('message', () => frames++);
        ws.on('unexpected-response', (_req, res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body, frames }));
        });
        // Taken (a failure of the test): given back after a second, so that the real server can stream again.
        ws.on('open', () =>
          setTimeout(() => {
            ws.close();
            resolve({ status: 101, body: '', frames });
          }, 1000),
        );
        ws.on('error', () => resolve({ status: 0, body: '', frames }));
      });
    // An ACL token is no credential between servers, with or without a server's name.
    for (const headers of [
      { 'X-Service-Token': secret } as Record<string, string>,
      { 'X-Service-Token': token, 'x-watchword-server-name': follower.serverName },
    ]) {
      const r = await attempt(headers);
      expect(r.status).toBe(403);
      expect(r.frames).toBe(0);
      expect(r.body).toMatch(/not a server of dc1: no server proof/);
    }
    // The server key itself proves a server of the datacenter, but a live server's name is not up for grabs ...
    const proof = new ServerKeyProof(Buffer.from(cluster.serverKeyOf('dc1'), 'base64'), 'dc1');
    const taken = await attempt(proof.request(follower.serverName, { name: leader.serverName, address: new URL(leader.url).host }).headers);
    expect(taken.status).toBe(409);
    expect(taken.body).toMatch(new RegExp(`a session for ${follower.serverName} is already live`));
    // ... and a name the coordinator does not know cannot stream (nor become a synchronous copy).
    const unknown = await attempt(proof.request('rogue', { name: leader.serverName, address: new URL(leader.url).host }).headers);
    expect(unknown.status).toBe(403);
    expect(unknown.body).toMatch(/rogue is not a known server of dc1/);
    // A proof a follower made for another server (an impostor it was sent to) cannot be relayed to the leader.
    const relayed = await attempt(proof.request(follower.serverName, { name: 'impostor', address: '127.0.0.1:1' }).headers);
    expect(relayed.status).toBe(403);
    expect(relayed.body).toMatch(/made its proof for another server/);
    // A replayed proof is refused too.
    const once = proof.request(`${follower.serverName}`, { name: leader.serverName, address: new URL(leader.url).host }).headers;
    await attempt(once);
    expect((await attempt(once)).body).toMatch(/used before|already live/);
    const view = (await call(leader, token, 'GET', '/v1/operator/servers')).body as { SyncSet: string[]; Servers: Array<{ Name: string }> };
    expect(view.SyncSet.every((n) => dc1.servers.some((s) => s.serverName === n))).toBe(true);
    expect(view.Servers.map((s) => s.Name).sort()).toEqual(dc1.servers.map((s) => s.serverName).sort());
  });

  it('a follower refuses an anonymous snapshot upload before reading it (nothing buffered, nothing forwarded)', async () => {
    const dc1 = cluster.get('dc1');
    const leader = await dc1.leader();
    const follower = dc1.servers.find((s) => s !== leader) as DatacenterHandle;
    const started = Date.now();
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(new URL('/v1/snapshot', follower.url), {
        method: 'PUT',
        headers: { 'Content-Length': String(600 * 1024 * 1024) },
      });
      let answered = false;
      req.on('response', (res) => {
        answered = true;
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', (err) => setTimeout(() => !answered && reject(err), 2000));
      const chunk = Buffer.alloc(1024 * 1024);
      const write = () => {
        while (!answered && !req.destroyed) if (!req.write(chunk)) return void req.once('drain', write);
      };
      write();
    });
    expect(status).toBe(403);
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('shows the servers in `watchword operator servers` and in the metrics', async () => {
    const dc1 = cluster.get('dc1');
    const leader = await dc1.leader();
    const follower = dc1.servers.find((s) => s !== leader) as DatacenterHandle;
    const out = await new Promise<{ code: number; stdout: string }>((resolve) =>
      execFile(
        process.execPath,
        [...watchwordCommand(), 'operator', 'servers', '--http-addr', follower.url, '--token', token],
        { cwd: ROOT, timeout: 30_000 },
        (err, stdout) => resolve({ code: err ? 1 : 0, stdout }),
      ),
    );
    expect(out.code).toBe(0);
    const lines = out.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^Node\s+Address\s+Role\s+State\s+Term\s+Applied\s+Lag\s+Sync set\s+Connected$/);
    expect(lines.find((l) => l.startsWith(leader.serverName))).toMatch(
      new RegExp(`^${leader.serverName}\\s+${new URL(leader.url).host}\\s+leader\\s+up\\s+\\d+`),
    );
    // Asked at a follower, the answer is the leader's view.
    expect(lines.at(-1)).toBe(`Answered by ${leader.serverName}`);
    expect(lines.find((l) => l.startsWith(follower.serverName))).toMatch(/\sfollower\s/);
    const metrics = async (s: DatacenterHandle) =>
      (await fetch(`${s.url}/v1/agent/metrics?format=prometheus`, { headers: { 'X-Service-Token': token } })).text();
    // The test before restarted a follower: the leader has a synchronous copy again once it has caught up.
    await until('a synchronous follower again', 10_000, async () =>
      /^watchword_server_running_without_sync_copy 0$/m.test(await metrics(leader)),
    );
    const atLeader = await metrics(leader);
    expect(atLeader).toMatch(/^watchword_server_is_leader 1$/m);
    expect(atLeader).toMatch(/^watchword_server_term [1-9]\d*$/m);
    expect(atLeader).toMatch(/^watchword_server_running_without_sync_copy 0$/m);
    expect(atLeader.match(/^watchword_server_in_sync_set\{server="[^"]+"\} 1$/gm)).toHaveLength(1);
    expect(atLeader).toMatch(new RegExp(`^watchword_server_lag_batches\\{server="${follower.serverName}"\\} \\d+$`, 'm'));
    expect(await metrics(follower)).toMatch(/^watchword_server_is_leader 0$/m);
  });

  it('followers answer reads, self and blocking queries, and a write through a follower is readable there at once', async () => {
    const dc1 = cluster.get('dc1');
    const leader = await dc1.leader();
    const follower = dc1.servers.find((s) => s !== leader) as DatacenterHandle;
    const created = await call(follower, token, 'PUT', '/v1/acl/token', { Description: 'via follower' });
    expect(created.status).toBe(200);
    const id = created.body?.AccessorID as string;
    const read = await call(follower, token, 'GET', `/v1/acl/token/${id}`);
    expect(read.status).toBe(200);
    expect(read.body?.Description).toBe('via follower');
    const local = await call(follower, token, 'PUT', '/v1/acl/token', { Description: 'local via follower', Local: true });
    expect(local.status).toBe(200);
    expect((await call(follower, token, 'GET', `/v1/acl/token/${local.body?.AccessorID as string}`)).status).toBe(200);
    const self = await call(follower, created.body?.SecretID as string, 'GET', '/v1/acl/token/self');
    expect(self.status).toBe(200);
    expect(self.body?.AccessorID).toBe(id);
    // That use was seen at a follower: it reports it to the leader, whose flush reaches every server (docs/http-api.md, "Last use").
    usedAtFollower = id;
    for (const s of dc1.servers)
      await until(
        `the last use on ${s.url}`,
        15_000,
        async () => typeof (await call(s, token, 'GET', `/v1/acl/token/${id}`)).body?.LastUsedTime === 'string',
      );
    usedAtFollowerShown = (await call(leader, token, 'GET', `/v1/acl/token/${id}`)).body?.LastUsedTime;
    // A global token used in dc2: its last use reaches the primary.
    const global = await call(leader, token, 'PUT', '/v1/acl/token', { Description: 'used in dc2' });
    const dc2 = cluster.get('dc2').servers[0] as DatacenterHandle;
    await until(
      'the token in dc2',
      10_000,
      // Replicated first: a secret dc2 lacks would be looked up at the primary, a use seen there.
      async () => (await call(dc2, token, 'GET', `/v1/acl/token/${global.body?.AccessorID as string}`)).status === 200,
    );
    expect((await call(dc2, global.body?.SecretID as string, 'GET', '/v1/acl/token/self')).status).toBe(200);
    await until(
      'the last use in dc2 at the primary',
      20_000,
      async () =>
        typeof (await call(leader, token, 'GET', `/v1/acl/token/${global.body?.AccessorID as string}`)).body?.LastUsedTime === 'string',
    );
    // A blocking query at a follower wakes on a write made at the leader.
    const index = Number((await call(follower, token, 'GET', '/v1/acl/tokens')).headers.get('x-service-index'));
    const blocked = call(follower, token, 'GET', `/v1/acl/tokens?index=${index}&wait=10s`, undefined, 15_000);
    await sleep(200);
    const later = await call(leader, token, 'PUT', '/v1/acl/token', { Description: 'wakes the follower' });
    expect(later.status).toBe(200);
    const woke = await blocked;
    expect(woke.status).toBe(200);
    expect((woke.body as unknown as Array<{ AccessorID: string }>).some((t) => t.AccessorID === later.body?.AccessorID)).toBe(true);
  });

  it("hands the leadership to a synchronous follower on an operator's request, at any server, losing no write made meanwhile", async () => {
    const dc1 = cluster.get('dc1');
    const leader = await dc1.leader();
    await until(
      'a synchronous follower',
      10_000,
      async () => ((await call(leader, token, 'GET', '/v1/operator/servers')).body?.SyncSet as string[] | undefined)?.length === 1,
    );
    const servers = (await call(leader, token, 'GET', '/v1/operator/servers')).body as { SyncSet: string[]; Term: number };
    const [member] = servers.SyncSet as [string];
    const other = dc1.servers.find((s) => s !== leader && s.serverName !== member) as DatacenterHandle;
    const path = '/v1/operator/raft/transfer-leader';
    // operator:write, the server named must hold every write (the synchronous set), and exist.
    expect((await call(other, '', 'POST', path)).status).toBe(403);
    const notInSet = await call(other, token, 'POST', `${path}?id=${other.serverName}`);
    expect([notInSet.status, notInSet.headers.get('x-service-error-code')]).toEqual([409, 'CONFLICT']);
    expect(String(notInSet.body?.message)).toContain(`${other.serverName} is not in ${leader.serverName}'s synchronous set (${member})`);
    expect((await call(other, token, 'POST', `${path}?id=nobody`)).status).toBe(400);
    expect((await call(other, token, 'POST', `${path}?id=${leader.serverName}`)).status).toBe(409);
    // Writes keep coming while the lead moves: each one acknowledged is there afterwards.
    const made: string[] = [];
    let writing = true;
    const writer = (async () => {
      while (writing) {
        const w = await call(other, token, 'PUT', '/v1/acl/token', { Description: 'during the handover' }, 5000);
        if (w.status === 200) made.push(w.body?.AccessorID as string);
        await sleep(10);
      }
    })();
    await sleep(200);
    // Asked of the server that neither leads nor takes over: it acts through etcd, not through the leader.
    const moved = await call(other, token, 'POST', path, undefined, 15_000);
    await sleep(300);
    writing = false;
    await writer;
    expect(moved.status).toBe(200);
    expect(moved.body).toMatchObject({ Success: true, From: leader.serverName, To: member });
    expect(moved.body?.Term as number).toBeGreaterThan(servers.Term);
    const next = await dc1.leader();
    expect(next.serverName).toBe(member);
    expect(made.length).toBeGreaterThan(5);
    for (const id of made) expect((await call(next, token, 'GET', `/v1/acl/token/${id}`)).status).toBe(200);
    // The old leader follows, still running.
    await until('the old leader following', 10_000, async () => {
      const view = (await call(next, token, 'GET', '/v1/operator/servers')).body as {
        Servers: Array<{ Name: string; Role: string; Connected: boolean }>;
      };
      return view.Servers.some((s) => s.Name === leader.serverName && s.Role === 'follower' && s.Connected);
    });
    // Audited where it was asked.
    await until('the audit line', 5000, async () => {
      const audit = (await call(other, token, 'GET', '/v1/operator/audit?type=leader-transferred')).body as unknown as {
        Events: Array<Record<string, unknown>>;
      };
      return audit.Events.some((e) => e.From === leader.serverName && e.To === member && typeof e.By === 'string');
    });
    // A datacenter of one server has no leadership to hand over.
    const single = await call(cluster.get('dc2'), token, 'POST', path);
    expect([single.status, String(single.body?.message)]).toEqual([400, expect.stringContaining('no leadership to hand over')]);
  }, 60_000);

  it('a follower that reaches no leader refuses ?consistent reads (503) rather than answer from its own copy', async () => {
    const dc1 = cluster.get('dc1');
    const leader = await dc1.leader();
    const follower = dc1.servers.find((s) => s !== leader) as DatacenterHandle;
    const created = await call(leader, token, 'PUT', '/v1/acl/token', { Description: 'before the kill' });
    expect(created.status).toBe(200);
    const id = created.body?.AccessorID as string;
    expect((await call(follower, token, 'GET', `/v1/acl/token/${id}?consistent`)).status).toBe(200);
    await leader.kill();
    const killedAt = Date.now();
    // The dead leader's key outlives it by its lease (3 s): nobody else leads before then,
    // so every ?consistent read at the follower in the first 1.5 s has no leader to go through.
    const answers: Array<{ status: number; code: string | null; message: string }> = [];
    while (Date.now() - killedAt < 1500) {
      const r = await call(follower, token, 'GET', `/v1/acl/token/${id}?consistent`, undefined, 5000);
      if (Date.now() - killedAt < 1500)
        answers.push({ status: r.status, code: r.headers.get('x-service-error-code'), message: String(r.body?.message ?? '') });
      await sleep(50);
    }
    expect(answers.length).toBeGreaterThan(3);
    // Refused, as any read that needs the leader while there is none: 503, saying why.
    expect(answers.filter((a) => a.status !== 503 || a.message === '')).toEqual([]);
    expect(answers.some((a) => a.code === 'NO_LEADER' && a.message.includes('reaches no leader'))).toBe(true);
    // Without ?consistent the follower answers from its own copy, as documented.
    expect((await call(follower, token, 'GET', `/v1/acl/token/${id}`)).status).toBe(200);
    await leader.start();
    const next = await dc1.leader(20_000);
    await until('a ?consistent read at a follower again', 20_000, async () => {
      const other = dc1.servers.find((s) => s !== next && s.pid !== undefined) as DatacenterHandle;
      return (await call(other, token, 'GET', `/v1/acl/token/${id}?consistent`)).status === 200;
    });
    await until(
      'a synchronous follower',
      20_000,
      async () => ((await call(next, token, 'GET', '/v1/operator/servers')).body?.SyncSet as string[] | undefined)?.length === 1,
    );
  }, 60_000);

  it('with both followers dead the leader drops them from the synchronous set and keeps acknowledging; restarted, they catch up and rejoin', async () => {
    const dc1 = cluster.get('dc1');
    const leader = await dc1.leader();
    const followers = dc1.servers.filter((s) => s !== leader);
    for (const f of followers) await f.kill();
    const started = Date.now();
    const write = await call(leader, token, 'PUT', '/v1/acl/token', { Description: 'alone' });
    expect(write.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(8000);
    const view = (await call(leader, token, 'GET', '/v1/operator/servers')).body as { SyncSet: string[]; RunningWithoutSyncCopy: boolean };
    expect(view.SyncSet).toEqual([]);
    expect(view.RunningWithoutSyncCopy).toBe(true);
    for (const f of followers) await f.start();
    await until(
      'a follower back in the synchronous set',
      20_000,
      async () => ((await call(leader, token, 'GET', '/v1/operator/servers')).body?.SyncSet as string[] | undefined)?.length === 1,
    );
    for (const f of followers)
      await until(
        `${f.serverName} to hold the write`,
        20_000,
        async () => (await call(f, token, 'GET', `/v1/acl/token/${write.body?.AccessorID as string}`)).status === 200,
      );
  }, 60_000);

  it('?dc= from another datacenter reaches a live server of the target datacenter when the first one is down', async () => {
    const dc1 = cluster.get('dc1');
    const first = dc1.servers[0] as DatacenterHandle;
    await first.kill();
    try {
      const res = await call(cluster.get('dc2'), token, 'GET', '/v1/acl/token/self?dc=dc1', undefined, 10_000);
      expect(res.status).toBe(200);
      expect(res.body?.SecretID).toBe(token);
    } finally {
      await first.start();
    }
    const leader = await dc1.leader(20_000);
    await until(
      'a synchronous follower',
      20_000,
      async () => ((await call(leader, token, 'GET', '/v1/operator/servers')).body?.SyncSet as string[] | undefined)?.length === 1,
    );
  }, 60_000);

  it('a leader cut off from etcd stops acknowledging before its lease ends, and no write is acknowledged by two leaders', async () => {
    const dc1 = cluster.get('dc1');
    const old = await dc1.leader();
    const others = dc1.servers.filter((s) => s !== old);
    await until(
      'a synchronous follower',
      10_000,
      async () => ((await call(old, token, 'GET', '/v1/operator/servers')).body?.SyncSet as string[] | undefined)?.length === 1,
    );
    const leaseMs = 3000;
    // Every round sends one new AccessorID through the old leader and through a follower at once.
    const rounds: Array<{ id: string; at: number; atOld: number; viaFollower: number; doneAt: number }> = [];
    let cutAt = 0;
    let newLeader: DatacenterHandle | undefined;
    let racing = true;
    const racer = async (n: number) => {
      for (let i = 0; racing && i < 10_000; i++) {
        const id = randomUUID();
        const at = Date.now();
        const status = (s: DatacenterHandle) =>
          call(s, token, 'PUT', '/v1/acl/token', { AccessorID: id, Description: `race ${n}` }, 4000).then(
            (r) => r.status,
            () => 0,
          );
        const [atOld, viaFollower] = await Promise.all([status(old), status(others[(n + i) % others.length] as DatacenterHandle)]);
        rounds.push({ id, at, atOld, viaFollower, doneAt: Date.now() });
        // Paced: the cut needs writes racing at both, not every core the suite shares.
        await sleep(atOld !== 200 && viaFollower !== 200 ? 50 : 20);
      }
    };
    const racers = Array.from({ length: 4 }, (_, n) => racer(n));
    try {
      // Cut only once the old leader has acknowledged some of the raced writes (a busy machine may take a while), with a
      // follower in its synchronous set: one it dropped under load (2 s without a confirmation) leaves no server that may
      // take over, and the datacenter rightly waits for the old leader (each server's Problem then says so).
      await until('writes acknowledged by the old leader, with a synchronous follower', 20_000, async () => {
        if (rounds.filter((r) => r.atOld === 200).length < 5) return false;
        const view = (await call(old, token, 'GET', '/v1/operator/servers', undefined, 1000)).body;
        return (view?.SyncSet as string[] | undefined)?.length === 1;
      });
      cutAt = Date.now();
      cluster.coordinatorLink(old.serverName).cut();
      onTestFinished(() => cluster.coordinatorLink(old.serverName).restore());
      await until('another server to lead', 40_000, async () => {
        const named = await Promise.all(
          others.map(async (s) => (await call(s, token, 'GET', '/v1/status/leader', undefined, 1000)).body as unknown as string),
        );
        newLeader = others.find((s) => named.every((a) => a === new URL(s.url).host));
        return newLeader !== undefined;
      }).catch(async (err: Error) => {
        // Seen once in about ten full runs: say what each server thought, for the next time.
        const views = await Promise.all(
          dc1.servers.map(async (s) => {
            const v = await call(s, token, 'GET', '/v1/operator/servers', undefined, 2000).catch((e: Error) => ({ body: e.message }));
            // What each logged of the election and the synchronous set since the cluster started.
            const told = s
              .output()
              .split('\n')
              .filter((l) => /coordinator:|synchronous set|synchronous copy|leadership/.test(l))
              .slice(-12);
            return `${s.serverName}: ${JSON.stringify(v.body)}\n  ${told.join('\n  ')}`;
          }),
        );
        throw new Error(`${err.message}; the servers said:\n${views.join('\n')}`);
      });
      await sleep(1500);
    } finally {
      racing = false;
      await Promise.all(racers);
    }
    // No ID was acknowledged twice: never two leaders taking writes at once.
    expect(rounds.filter((r) => r.atOld === 200 && r.viaFollower === 200)).toEqual([]);
    // The old leader acknowledged writes before the cut, and none once its lease (renewed before the cut) could have ended.
    const ackedByOld = rounds.filter((r) => r.atOld === 200);
    expect(ackedByOld.some((r) => r.doneAt < cutAt)).toBe(true);
    const lastOld = Math.max(...ackedByOld.map((r) => r.doneAt));
    expect(lastOld).toBeLessThan(cutAt + leaseMs);
    // The new leader took writes (through the followers) after the cut.
    expect(rounds.some((r) => r.at > lastOld && r.viaFollower === 200)).toBe(true);
    // Cut off, the old leader refuses writes with NO_LEADER but still answers reads.
    const refused = await call(old, token, 'PUT', '/v1/acl/token', { Description: 'refused' });
    expect(refused.status).toBe(503);
    expect(refused.body?.code).toBe('NO_LEADER');
    expect(refused.body?.message).toMatch(/no leader is known in datacenter dc1 \(this server cannot reach etcd/);
    const someAcked = rounds.find((r) => r.atOld === 200 || r.viaFollower === 200) as { id: string };
    expect((await call(old, token, 'GET', `/v1/acl/token/${someAcked.id}`)).status).toBe(200);
    cluster.coordinatorLink(old.serverName).restore();
    await until(
      `${old.serverName} to follow the new leader`,
      20_000,
      async () =>
        ((await call(old, token, 'GET', '/v1/status/leader')).body as unknown as string) ===
        new URL((newLeader as DatacenterHandle).url).host,
    );
    await until(
      'a synchronous follower again',
      20_000,
      async () =>
        ((await call(newLeader as DatacenterHandle, token, 'GET', '/v1/operator/servers')).body?.SyncSet as string[] | undefined)
          ?.length === 1,
    );
    const acked = rounds.filter((r) => r.atOld === 200 || r.viaFollower === 200).map((r) => r.id);
    for (const s of dc1.servers) {
      await until(`${s.serverName} to hold every acknowledged write`, 20_000, async () => {
        const list = (await call(s, token, 'GET', '/v1/acl/tokens', undefined, 10_000)).body as unknown as Array<{ AccessorID: string }>;
        const have = new Set(list.map((t) => t.AccessorID));
        return acked.every((id) => have.has(id));
      });
    }
    await cluster.waitForReplication(30_000).catch(async (err: unknown) => {
      const dc2 = cluster.get('dc2');
      const idx = await Promise.all(
        dc1.servers.map(async (s) => `${s.serverName} ${(await call(s, token, 'GET', '/v1/acl/tokens')).headers.get('x-service-index')}`),
      );
      throw new Error(
        `${(err as Error).message}; dc1: ${idx.join(', ')}; dc2: ${JSON.stringify(await dc2.replication())}\n${dc2.output().slice(-3000)}`,
      );
    });
    console.log(
      `etcd cut: old leader's last acknowledgement ${lastOld - cutAt} ms after the cut (lease ${leaseMs} ms); ${acked.length} IDs acknowledged once, none twice, of ${rounds.length} raced`,
    );
  }, 90_000);

  it('loses no acknowledged write when the leader is killed under load, twice in a row; a new leader takes writes within 10 s', async () => {
    // Paced: the kills need writes in flight, not every core the suite shares.
    const report = await runFailover({ cluster, kills: 2, writers: 6, pauseMs: 25 });
    // A last use written before the failovers is still known to the new leader.
    if (usedAtFollower !== undefined) {
      const now = await cluster.get('dc1').leader();
      expect((await call(now, token, 'GET', `/v1/acl/token/${usedAtFollower}`)).body?.LastUsedTime).toBe(usedAtFollowerShown);
    }
    expect(report.failovers).toHaveLength(2);
    for (const f of report.failovers) expect(f.ms).toBeLessThan(10_000);
    expect(report.acknowledged.global).toBeGreaterThan(50);
    expect(report.acknowledged.local).toBeGreaterThan(20);
    expect(report.lost).toEqual([]);
    expect(report.notReplicated).toEqual([]);
    expect(report.leaked).toEqual([]);
    console.log(
      `failover times (ms): ${report.failovers.map((f) => f.ms).join(', ')}; acknowledged writes: ${report.acknowledged.global + report.acknowledged.local}`,
    );
  }, 150_000);
});
