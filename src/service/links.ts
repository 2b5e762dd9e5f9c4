import { invalid } from '../domain/errors.js';
import { DEFAULT_NAMESPACE } from '../domain/ids.js';
import { dedupeLinks } from '../domain/grants.js';
import type { Link, NamedLink, PolicyRecord, RoleRecord, Scope } from '../domain/types.js';
import type { Reader } from '../store/reader.js';

export type LinkKind = 'policy' | 'role';

/** A link as a client writes it: by ID, by name, or both (ID wins). */
export interface LinkInput {
  ID?: string;
  Name?: string;
}

type Linkable = PolicyRecord | RoleRecord;

const TABLE = { policy: 'policies', role: 'roles' } as const;

/** A linked object is usable from `scope` when it lives there or in the partition's default namespace. */
const reachableFrom = (target: Linkable, scope: Scope): boolean =>
  target.Partition === scope.Partition && (target.Namespace === scope.Namespace || target.Namespace === DEFAULT_NAMESPACE);

async function byName(reader: Reader, kind: LinkKind, scope: Scope, name: string): Promise<Linkable | undefined> {
  const get = (s: Scope) => (kind === 'policy' ? reader.getPolicyByName(s, name) : reader.getRoleByName(s, name));
  return (await get(scope)) ?? (scope.Namespace === DEFAULT_NAMESPACE ? undefined : get({ ...scope, Namespace: DEFAULT_NAMESPACE }));
}

/**
 * Resolves links given by ID or name to stored IDs, in the owner's scope with the
 * fallback to the default namespace. A link to nothing is a 400 in Consul's words.
 * Duplicates collapse by ID, first kept, order kept.
 */
export async function resolveLinks(reader: Reader, kind: LinkKind, links: readonly LinkInput[] | undefined, scope: Scope): Promise<Link[]> {
  const out: Link[] = [];
  for (const link of links ?? []) {
    const id = link.ID !== undefined && link.ID !== '' ? link.ID : undefined;
    const name = link.Name !== undefined && link.Name !== '' ? link.Name : undefined;
    if (id !== undefined) {
      const target = (await reader.getRecord(TABLE[kind], id)) as Linkable | undefined;
      if (target === undefined || !reachableFrom(target, scope)) throw invalid(`No such ACL ${kind} with ID ${JSON.stringify(id)}`);
      out.push({ ID: target.ID });
    } else if (name !== undefined) {
      const target = await byName(reader, kind, scope, name);
      if (target === undefined) throw invalid(`No such ACL ${kind} with name ${JSON.stringify(name)}`);
      out.push({ ID: target.ID });
    } else {
      throw invalid(`${kind === 'policy' ? 'Policy' : 'Role'} link is missing both ID and Name`);
    }
  }
  return dedupeLinks(out);
}

/** Current names of every target the links point to, read in one batch; gone targets are absent. */
export async function linkNames(reader: Reader, kind: LinkKind, links: Iterable<Link>): Promise<Map<string, string>> {
  const ids = [...new Set([...links].map((l) => l.ID))];
  if (ids.length === 0) return new Map();
  const targets = (await reader.getRecords(TABLE[kind], ids)) as Linkable[];
  return new Map(targets.map((t) => [t.ID, t.Name]));
}

/** Links with their names from `names`; links whose target is gone are dropped. */
export function nameLinks(links: readonly Link[], names: ReadonlyMap<string, string>): NamedLink[] {
  const out: NamedLink[] = [];
  for (const l of links) {
    const name = names.get(l.ID);
    if (name !== undefined) out.push({ ID: l.ID, Name: name });
  }
  return out;
}

/** Links with names resolved now; links whose target is gone are dropped. */
export async function namedLinks(reader: Reader, kind: LinkKind, links: readonly Link[]): Promise<NamedLink[]> {
  return links.length === 0 ? [] : nameLinks(links, await linkNames(reader, kind, links));
}
