import { fileURLToPath, pathToFileURL } from 'node:url';
import { SignJWT, exportSPKI, generateKeyPair } from 'jose';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/program.js';
import { unchangedBody } from '../../src/client/edit.js';
import { WatchwordClient } from '../../src/client/index.js';
import { type FieldKind, type FieldTable, RECORD_FIELDS, type RecordKind } from '../../src/domain/records.js';
import { FollowerStream } from '../../src/ha/follower-stream.js';
import { type LeaderFrame, SERVER_PROTOCOL_VERSION } from '../../src/ha/server-protocol.js';
import { LevelStore } from '../../src/store/level-store.js';
import { authMethodID } from '../../src/store/schema.js';
import type { ServerBatch } from '../../src/store/store.js';
import { type TestDaemon, startTestDaemon, waitFor, secondaryConfig } from '../helpers/test-daemon.js';
import { recordingReplicator } from '../helpers/replicator.js';
import { tempDir } from '../helpers/temp-dir.js';

/**
 * One record, every path (src/ARCHITECTURE.md, "The store"): a token, a policy, a role, an auth method and a
 * binding rule with every declared field set, pushed through every path an object takes, every
 * field compared at every hop. The records' fields come from their declarations
 * (domain/records.ts): a field declared there is set here (a field the body takes as given gets
 * a value of its kind), so a new field is pushed through every path too, and a path that drops
 * it fails naming the path and the field.
 */

type Json = Record<string, unknown>;

/** Where each kind of record is read and written over HTTP, and what names it. */
const ROUTES: Record<RecordKind, { read: (id: string) => string; write: (id: string) => string; id: string }> = {
  tokens: { read: (id) => `/v1/acl/token/${id}`, write: (id) => `/v1/acl/token/${id}`, id: 'AccessorID' },
  policies: { read: (id) => `/v1/acl/policy/${id}`, write: (id) => `/v1/acl/policy/${id}`, id: 'ID' },
  roles: { read: (id) => `/v1/acl/role/${id}`, write: (id) => `/v1/acl/role/${id}`, id: 'ID' },
  authMethods: { read: (name) => `/v1/acl/auth-method/${name}`, write: (name) => `/v1/acl/auth-method/${name}`, id: 'Name' },
  bindingRules: { read: (id) => `/v1/acl/binding-rule/${id}`, write: (id) => `/v1/acl/binding-rule/${id}`, id: 'ID' },
  quotas: { read: (id) => `/v1/acl/quota/${id}`, write: (id) => `/v1/acl/quota/${id}`, id: 'ID' },
};

/** A value of each kind for a field a write takes as given (a field declared with no code of its own). */
const SAMPLE: Partial<Record<FieldKind, unknown>> = {
  string: 'every field',
  boolean: true,
  strings: ['dc1', 'dc2'],
  config: { every: 'field' },
  time: '2031-01-02T03:04:05Z',
};

/** Fields given a value of their kind: those a write takes as given (`api: 'input'`) that the setup does not set. */
function withGiven(fields: FieldTable, body: Json): Json {
  const out = { ...body };
  for (const [name, spec] of Object.entries(fields)) if (spec.api === 'input' && out[name] === undefined) out[name] = SAMPLE[spec.kind];
  return out;
}

const isSet = (v: unknown): boolean =>
  v !== undefined &&
  v !== '' &&
  !(Array.isArray(v) && v.length === 0) &&
  !(typeof v === 'object' && v !== null && Object.keys(v).length === 0);

/** Fields that differ between datacenters (or after a write) by design: each datacenter's own indexes. */
const indexFields = (fields: FieldTable): string[] =>
  Object.entries(fields)
    .filter(([, s]) => s.kind === 'index')
    .map(([n]) => n);

/**
 * Every declared field of `kind` as `path` shows it equal to what came before (`from`), but
 * those named in `except`: the first that differs fails the test naming the path and the field.
 */
function sameAt(path: string, kind: RecordKind, from: Json, now: Json | undefined, except: readonly string[] = []): void {
  if (now === undefined) throw new Error(`${path}: the ${kind} record is gone`);
  for (const field of Object.keys(RECORD_FIELDS[kind])) {
    if (except.includes(field)) continue;
    if (JSON.stringify(now[field]) !== JSON.stringify(from[field]))
      throw new Error(`${path} lost or changed ${kind}.${field}: ${JSON.stringify(from[field])} became ${JSON.stringify(now[field])}`);
  }
  for (const field of Object.keys(now))
    if (!(field in RECORD_FIELDS[kind])) throw new Error(`${path}: ${kind} shows ${field}, which its declaration does not list`);
}

describe('one record, every path', () => {
  const cleanup: Array<() => Promise<void>> = [];
  let dc1: TestDaemon;
  let dataDir: string;
  let sign: (name: string) => Promise<string>;
  /** The every-field objects as dc1 first answered them, by kind and ID. */
  const made = new Map<RecordKind, { id: string; view: Json }[]>();
  let cloneable = '';

  /** The record as a read shows it, with the fields no view shows (a rotated-out secret) as the daemon's store holds them. */
  const get = async (d: TestDaemon, kind: RecordKind, id: string): Promise<Json | undefined> => {
    const res = await d.api('GET', ROUTES[kind].read(id));
    if (res.status !== 200) return undefined;
    const view = { ...(res.body as Json) };
    // A quota's Used is a count of tokens, not a field of the record.
    if (kind === 'quotas') delete view.Used;
    const stored = d.daemon.store.reader.getRecords(kind, [kind === 'authMethods' ? authMethodID('default', 'default', id) : id])[0] as
      | Json
      | undefined;
    for (const [field, spec] of Object.entries(RECORD_FIELDS[kind]))
      if (spec.view === 'never' && stored?.[field] !== undefined) view[field] = stored[field];
    return view;
  };
  const everything = async (d: TestDaemon): Promise<Map<string, Json | undefined>> => {
    const out = new Map<string, Json | undefined>();
    for (const [kind, list] of made) for (const { id } of list) out.set(`${kind}:${id}`, await get(d, kind, id));
    return out;
  };
  const record = (kind: RecordKind, id: string, view: Json) => {
    const list = made.get(kind) ?? [];
    list.push({ id, view });
    made.set(kind, list);
  };

  beforeAll(async () => {
    const keys = await generateKeyPair('RS256', { extractable: true });
    sign = (name) =>
      new SignJWT({ name }).setProtectedHeader({ alg: 'RS256' }).setIssuedAt().setExpirationTime('10m').sign(keys.privateKey);
    const dir = await tempDir();
    cleanup.push(() => dir.remove());
    dataDir = dir.path;
    dc1 = await startTestDaemon({ config: { data_dir: dataDir } });
    const put = async (kind: RecordKind, path: string, body: Json) => {
      const res = await dc1.api('PUT', path, { body: withGiven(RECORD_FIELDS[kind], body) as never });
      expect(res.status, `${path}: ${res.text}`).toBe(200);
      const view = res.body as Json;
      const shown = { ...view };
      if (kind === 'quotas') delete shown.Used;
      record(kind, String(shown[ROUTES[kind].id]), shown);
      return shown;
    };
    const policy = await put('policies', '/v1/acl/policy', {
      Name: 'every-field',
      Description: 'a policy with every field',
      Rules: 'acl = "read"\nservice_prefix "" { policy = "read" }',
      Datacenters: ['dc1', 'dc2'],
    });
    const grants = {
      ServiceIdentities: [{ ServiceName: 'web', Datacenters: ['dc1'] }],
      NodeIdentities: [{ NodeName: 'n1', Datacenter: 'dc1' }],
      TemplatedPolicies: [{ TemplateName: 'builtin/service', TemplateVariables: { Name: 'api' }, Datacenters: ['dc1'] }],
    };
    const role = await put('roles', '/v1/acl/role', {
      Name: 'every-field',
      Description: 'a role with every field',
      Policies: [{ ID: policy.ID }],
      ...grants,
    });
    await put('authMethods', '/v1/acl/auth-method', {
      Name: 'every-field',
      Type: 'jwt',
      DisplayName: 'Every Field',
      Description: 'a method with every field',
      MaxTokenTTL: '10h',
      TokenIdleTTL: '30h',
      TokenLocality: 'global',
      Config: { JWTValidationPubKeys: [await exportSPKI(keys.publicKey)], ClaimMappings: { name: 'name' } },
    });
    for (const [BindType, BindName] of [
      ['policy', 'every-field'],
      ['role', 'every-field'],
      ['service', '${value.name}'],
      ['node', 'n1'],
    ])
      await put('bindingRules', '/v1/acl/binding-rule', {
        AuthMethod: 'every-field',
        Description: 'a rule',
        Selector: 'value.name == "web"',
        BindType,
        BindName,
      });
    await put('bindingRules', '/v1/acl/binding-rule', {
      AuthMethod: 'every-field',
      Description: 'a binding rule with every field',
      Selector: 'value.name == "web"',
      BindType: 'templated-policy',
      BindName: 'builtin/service',
      BindVars: { Name: '${value.name}' },
    });
    // Quotas: one of each scope between them; limits wide enough for the tokens made below.
    await put('quotas', '/v1/acl/quota', {
      Name: 'every-field',
      Description: 'a quota with every field',
      AuthMethod: 'every-field',
      MaxTokens: 1000,
      MaxTokenTTL: '10h',
      MinTokenTTL: '1m',
      Local: false,
    });
    await put('quotas', '/v1/acl/quota', { Name: 'every-field-namespace', Namespace: 'default', MaxTokens: 1000 });
    await put('quotas', '/v1/acl/quota', { Name: 'every-field-partition', Partition: 'default' });
    // A token through the API (every field it takes), and one through a login (the method's too).
    const token = await put('tokens', '/v1/acl/token', {
      Description: 'a token with every field',
      Policies: [{ ID: policy.ID }],
      Roles: [{ ID: role.ID }],
      ...grants,
      ExpirationTTL: '10h',
    });
    cloneable = String(token.AccessorID);
    // A rotation in its overlap: the replaced secret and its end are stored (the secret shown to no one).
    const rotated = await dc1.api('PUT', `/v1/acl/token/${token.AccessorID}/rotate`, { body: { Overlap: '20h' } });
    expect(rotated.status, rotated.text).toBe(200);
    (made.get('tokens') as Array<{ id: string; view: Json }>).splice(-1, 1, {
      id: String(token.AccessorID),
      view: (await get(dc1, 'tokens', String(token.AccessorID))) as Json,
    });
    const login = await dc1.api('POST', '/v1/acl/login', {
      token: undefined,
      body: { AuthMethod: 'every-field', BearerToken: await sign('web'), Meta: { pod: 'p1' } },
    });
    expect(login.status, login.text).toBe(200);
    const loginID = String((login.body as Json).AccessorID);
    // AuthMethodNamespace is written where a method of another namespace made the token (Consul Enterprise): as such a record is stored.
    await dc1.daemon.store.transact((tx) => {
      const t = tx.getToken(loginID);
      if (t) tx.put('tokens', { ...t, AuthMethodNamespace: 'default' });
    });
    record('tokens', loginID, (await get(dc1, 'tokens', loginID)) as Json);
  }, 30_000);

  afterAll(async () => {
    for (const c of cleanup.reverse()) await c();
    await dc1?.close();
  });

  it('has every declared field set on some record of each kind', () => {
    for (const [kind, fields] of Object.entries(RECORD_FIELDS) as Array<[RecordKind, FieldTable]>) {
      const views = (made.get(kind) ?? []).map((m) => m.view);
      expect(views.length, `no ${kind} made`).toBeGreaterThan(0);
      const unset = Object.keys(fields).filter(
        (f) => !views.some((v) => isSet(v[f]) || typeof v[f] === 'boolean' || typeof v[f] === 'number'),
      );
      expect(unset, `${kind}: fields no every-field record sets`).toEqual([]);
    }
  });

  it('keeps every field through the API: read, an update sending back what was read, a clone', async () => {
    for (const [kind, list] of made)
      for (const { id, view } of list) {
        const read = await get(dc1, kind, id);
        sameAt('API create, then read', kind, view, read);
        const res = await dc1.api('PUT', ROUTES[kind].write(id), { body: unchangedBody(RECORD_FIELDS[kind], read as Json) as never });
        expect(res.status, `${kind} ${id}: ${res.text}`).toBe(200);
        sameAt('API update with the record as read', kind, read as Json, await get(dc1, kind, id), ['ModifyIndex']);
      }
    const source = (await get(dc1, 'tokens', cloneable)) as Json;
    const clone = await dc1.api('PUT', `/v1/acl/token/${cloneable}/clone`, { body: {} });
    expect(clone.status, clone.text).toBe(200);
    // A clone is a new token: its own secrets, no rotation of the source's.
    sameAt('API clone', 'tokens', source, clone.body as Json, [
      'AccessorID',
      'SecretID',
      'PreviousSecretID',
      'PreviousSecretExpirationTime',
      'CreateTime',
      'CreateIndex',
      'ModifyIndex',
    ]);
  });

  it('keeps every field in the store across a clean stop (its checkpoint) and the next start', async () => {
    const before = await everything(dc1);
    await dc1.daemon.close();
    dc1 = await startTestDaemon({ config: { data_dir: dataDir } });
    for (const [key, view] of before) {
      const [kind, id] = key.split(':') as [RecordKind, string];
      sameAt('a checkpoint and restart', kind, view as Json, await get(dc1, kind, id));
    }
  });

  it('keeps every field through replication to a secondary: its snapshot, then the stream', async () => {
    const dc2 = await startTestDaemon({
      config: secondaryConfig(dc1),
    });
    cleanup.push(() => dc2.close());
    await waitFor(async () => (await get(dc2, 'tokens', cloneable)) !== undefined, 10_000);
    const at1 = await everything(dc1);
    for (const [key, view] of at1) {
      const [kind, id] = key.split(':') as [RecordKind, string];
      sameAt('replication (snapshot) to dc2', kind, view as Json, await get(dc2, kind, id), indexFields(RECORD_FIELDS[kind]));
    }
    // A change streamed: each object written again (sent back as read), then read at dc2.
    for (const [kind, list] of made)
      for (const { id } of list) {
        const res = await dc1.api('PUT', ROUTES[kind].write(id), {
          body: unchangedBody(RECORD_FIELDS[kind], (await get(dc1, kind, id)) as Json) as never,
        });
        expect(res.status, `${kind} ${id}: ${res.text}`).toBe(200);
      }
    const index = Number((await dc1.api('GET', '/v1/acl/tokens')).headers.get('x-service-index'));
    await waitFor(async () => (await new WatchwordClient({ address: dc2.url }).replication()).ReplicatedIndex >= index, 10_000);
    for (const [key, view] of await everything(dc1)) {
      const [kind, id] = key.split(':') as [RecordKind, string];
      sameAt('replication (stream) to dc2', kind, view as Json, await get(dc2, kind, id), indexFields(RECORD_FIELDS[kind]));
    }
  });

  it('keeps every field through a snapshot saved and restored elsewhere', async () => {
    const file = Buffer.from(
      await (await fetch(`${dc1.url}/v1/snapshot`, { headers: { 'X-Service-Token': dc1.management } })).arrayBuffer(),
    );
    const other = await startTestDaemon();
    cleanup.push(() => other.close());
    const res = await fetch(`${other.url}/v1/snapshot`, { method: 'PUT', headers: { 'X-Service-Token': other.management }, body: file });
    expect(res.status, await res.clone().text()).toBe(200);
    for (const [key, view] of await everything(dc1)) {
      const [kind, id] = key.split(':') as [RecordKind, string];
      sameAt('a snapshot saved and restored', kind, view as Json, await get(other, kind, id), indexFields(RECORD_FIELDS[kind]));
    }
  });

  it("keeps every field through an HA follower: the leader's batches, then its snapshot", async () => {
    const a = await tempDir();
    const b = await tempDir();
    cleanup.push(
      () => a.remove(),
      () => b.remove(),
    );
    const leader = await LevelStore.open(a.path, { durability: 'fsync', changeLog: true });
    const replicator = recordingReplicator(3);
    leader.setReplicator(replicator);
    const follower = await LevelStore.open(b.path, { durability: 'fsync', changeLog: true });
    follower.setFollower(true);
    const stream = new FollowerStream(
      follower,
      { name: 'f1', address: () => '127.0.0.1:2', term: 3, logger: pino({ level: 'silent' }) },
      { send: () => undefined, drop: (why) => expect.fail(`the follower dropped the stream: ${why}`), welcomed: () => undefined },
    );
    try {
      const stored: Array<[RecordKind, string, Json]> = [];
      for (const [kind, list] of made)
        for (const { id } of list) {
          const r = dc1.daemon.store.reader.getRecord(kind, kind === 'authMethods' ? authMethodID('default', 'default', id) : id);
          expect(r, `${kind} ${id} in dc1's store`).toBeDefined();
          stored.push([kind, id, r as unknown as Json]);
        }
      await leader.transact((tx) => {
        for (const [kind, , r] of stored) tx.put(kind, r as never);
      });
      const welcome = (mode: 'tail' | 'snapshot'): LeaderFrame => ({
        t: 'welcome',
        v: SERVER_PROTOCOL_VERSION,
        term: 3,
        leader: 'leader',
        mode,
      });
      stream.receive(welcome('tail'));
      for (const batch of replicator.batches) stream.receive({ t: 'batch', ...(batch as ServerBatch) });
      await stream.idle();
      for (const [kind, id, r] of stored) {
        const key = kind === 'authMethods' ? authMethodID('default', 'default', id) : id;
        sameAt(
          "an HA follower's stream",
          kind,
          r,
          follower.reader.getRecord(kind, key) as unknown as Json,
          indexFields(RECORD_FIELDS[kind]),
        );
      }
      // A second follower takes the leader's whole state as a snapshot (its intake).
      const c = await tempDir();
      cleanup.push(() => c.remove());
      const fresh = await LevelStore.open(c.path, { durability: 'fsync', changeLog: true });
      fresh.setFollower(true);
      const intake = new FollowerStream(
        fresh,
        { name: 'f2', address: () => '127.0.0.1:3', term: 3, logger: pino({ level: 'silent' }) },
        { send: () => undefined, drop: (why) => expect.fail(`the follower dropped the stream: ${why}`), welcomed: () => undefined },
      );
      intake.receive(welcome('snapshot'));
      const snapshot = leader.serverSnapshot(1 << 20);
      let chunk = await snapshot.next();
      for (; !chunk.done; chunk = await snapshot.next())
        intake.receive({ t: 'snapshot', pairs: chunk.value, last: false, seq: 0, term: 0 });
      intake.receive({ t: 'snapshot', pairs: [], last: true, seq: chunk.value.seq, term: chunk.value.term });
      await intake.idle();
      for (const [kind, id, r] of stored) {
        const key = kind === 'authMethods' ? authMethodID('default', 'default', id) : id;
        sameAt(
          "an HA follower's snapshot intake",
          kind,
          r,
          fresh.reader.getRecord(kind, key) as unknown as Json,
          indexFields(RECORD_FIELDS[kind]),
        );
      }
      await intake.stop();
      await fresh.close();
    } finally {
      await stream.stop();
      await leader.close();
      await follower.close();
    }
  });

  it("keeps every field through the CLI's token update and the web UI's save", async () => {
    const before = (await get(dc1, 'tokens', cloneable)) as Json;
    const out: string[] = [];
    const code = await runCli(
      [
        'acl',
        'token',
        'update',
        '-accessor-id',
        cloneable,
        '-description',
        'changed by the CLI',
        '-http-addr',
        dc1.url,
        '-token',
        dc1.management,
      ],
      { out: (t) => void out.push(t), err: (t) => void out.push(t), setExitCode: () => undefined, env: {} },
    );
    expect(code, out.join('')).toBe(0);
    const after = (await get(dc1, 'tokens', cloneable)) as Json;
    sameAt('the CLI token update', 'tokens', before, after, ['Description', 'Hash', 'ModifyIndex']);
    expect(after.Description).toBe('changed by the CLI');
    // The UI's form models (a plain ES module the browser loads), as it saves an edit.
    const models = (await import(pathToFileURL(fileURLToPath(new URL('../../src/ui/public/models.js', import.meta.url))).href)) as {
      MODELS: Record<string, unknown>;
      bodyOf: (model: unknown, draft: Json, editing: boolean) => Json;
    };
    const UI_MODEL: Record<RecordKind, string> = {
      tokens: 'token',
      policies: 'policy',
      roles: 'role',
      authMethods: 'authMethod',
      bindingRules: 'bindingRule',
      quotas: 'quota',
    };
    for (const [kind, list] of made)
      for (const { id } of list) {
        const read = (await get(dc1, kind, id)) as Json;
        const body = models.bodyOf(models.MODELS[UI_MODEL[kind]], read, true);
        const res = await dc1.api('PUT', ROUTES[kind].write(id), { body: body as never });
        expect(res.status, `${kind} ${id}: ${res.text}`).toBe(200);
        sameAt("the web UI's save", kind, read, await get(dc1, kind, id), ['ModifyIndex']);
      }
  });
});
