import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUDIT_OBJECT_KINDS, AUDIT_TYPES, auditTypesTable } from '../../src/domain/audit-types.js';
import { type TestDaemon, startTestDaemon } from '../helpers/test-daemon.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Every .ts file under src/, but the registry itself. */
async function sources(): Promise<Array<{ path: string; text: string }>> {
  const out: Array<{ path: string; text: string }> = [];
  for (const entry of await readdir(join(ROOT, 'src'), { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.ts') || entry.name === 'audit-types.ts') continue;
    const path = join(entry.parentPath, entry.name);
    out.push({ path, text: await readFile(path, 'utf8') });
  }
  return out;
}

/**
 * One registry of audit event types (src/domain/audit-types.ts): the emitters take its type
 * (an unlisted one does not compile), and docs/audit.md's table, the web UI's Audit page and the
 * audit endpoint's filter all come from it; a type missing from one of them fails here.
 */
describe('the audit event types', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startTestDaemon();
  });
  afterAll(() => d.close());

  it("is docs/audit.md's table, row for row", async () => {
    const readme = await readFile(join(ROOT, 'docs', 'audit.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Audit log'), readme.indexOf('\n## ', readme.indexOf('## Audit log') + 1));
    const table = section.slice(section.indexOf('| Type | when | also |'), section.indexOf('\n\n', section.indexOf('| Type |')));
    expect(table, "docs/audit.md's audit table is not auditTypesTable() of src/domain/audit-types.ts").toEqual(auditTypesTable());
    const named = [...table.matchAll(/^\| ([^|]+) \|/gm)].flatMap((m) => [...(m[1] as string).matchAll(/`([a-z-]+)`/g)].map((x) => x[1]));
    expect(named.sort()).toEqual([...AUDIT_TYPES].sort());
  });

  it('is what every emitter uses: each type is emitted somewhere in src/', async () => {
    const files = await sources();
    // Object changes name their kind and operation; other types are written out where they are emitted.
    const unused = AUDIT_TYPES.filter((t) => !files.some((f) => f.text.includes(`'${t}'`)));
    expect(unused, 'registered audit types no code emits').toEqual([]);
  });

  it("is the web UI's list: the Audit page loads it from the server", async () => {
    const res = await fetch(`${d.url}/ui/audit-types.js`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/javascript/);
    const text = await res.text();
    const types = JSON.parse(/AUDIT_TYPES = (\[.*\]);/.exec(text)?.[1] ?? 'null');
    const kinds = JSON.parse(/AUDIT_KINDS = (\[.*\]);/.exec(text)?.[1] ?? 'null');
    expect(types).toEqual(AUDIT_TYPES);
    expect(kinds).toEqual(AUDIT_OBJECT_KINDS);
    const page = await readFile(join(ROOT, 'src/ui/public/audit.js'), 'utf8');
    expect(page).toContain("from './audit-types.js'");
    // No list of its own beside it.
    for (const t of ['token-create', 'snapshot-restore', 'replication-disconnect']) expect(page).not.toContain(`'${t}'`);
  });

  it("is the endpoint's filter: an unknown type or kind is a 400 naming it, a known one answers", async () => {
    const bad = await d.api('GET', '/v1/operator/audit?type=token-created');
    expect(bad.status).toBe(400);
    const message = (bad.body as { message: string }).message;
    expect(message).toContain('"token-created" is no audit event type');
    expect(message).toContain('token-create,');
    const badKind = await d.api('GET', '/v1/operator/audit?kind=tokens');
    expect(badKind.status).toBe(400);
    expect((badKind.body as { message: string }).message).toContain('"tokens" is no object kind');
    const good = await d.api('GET', '/v1/operator/audit?type=bootstrap&kind=token');
    expect(good.status).toBe(200);
  });
});
