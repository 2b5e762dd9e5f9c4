import { invalid } from '../domain/errors.js';
import { DEFAULT_NAMESPACE } from '../domain/ids.js';
import type { Link, NamedLink, PolicyRecord, RoleRecord, Scope } from '../domain/types.js';
import type { StateReader, TxReader } from '../store/store.js';

/** What link resolution reads: durable state, or a transaction's newest state. */
export type LinkReader = Pick<StateReader & TxReader, 'getRecord' | 'getPolicyByName' | 'getRoleByName'>;

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

function byName(reader: LinkReader, kind: LinkKind, scope: Scope, name: string): Linkable | undefined {
  const get = (s: Scope) => (kind === 'policy' ? reader.getPolicyByName(s, name) : reader.getRoleByName(s, name));
  return get(scope) ?? (scope.Namespace === DEFAULT_NAMESPACE ? undefined : get({ ...scope, Namespace: DEFAULT_NAMESPACE }));
}

/**
 * Resolves links given by ID or name, in the owner's scope with the fallback to the
 * default namespace. A link to nothing is a 400 in Consul's words. Returns the links
 * to store (IDs; duplicates collapse by ID, first kept, order kept) and, named, what a
 * view of the new object shows, so nothing is looked up twice.
 */
export function resolveLinks(
  reader: LinkReader,
  kind: LinkKind,
  links: readonly LinkInput[] | undefined,
  scope: Scope,
): { ids: Link[]; named: NamedLink[] } {
  const named: NamedLink[] = [];
  const seen = new Set<string>();
  for (const link of links ?? []) {
    const id = link.ID !== undefined && link.ID !== '' ? link.ID : undefined;
    const name = link.Name !== undefined && link.Name !== '' ? link.Name : undefined;
    let target: Linkable | undefined;
    if (id !== undefined) {
      target = reader.getRecord(TABLE[kind], id) as Linkable | undefined;
      if (target === undefined || !reachableFrom(target, scope)) throw invalid(`No such ACL ${kind} with ID ${JSON.stringify(id)}`);
    } else if (name !== undefined) {
      target = byName(reader, kind, scope, name);
      if (target === undefined) throw invalid(`No such ACL ${kind} with name ${JSON.stringify(name)}`);
    } else {
      throw invalid(`${kind === 'policy' ? 'Policy' : 'Role'} link is missing both ID and Name`);
    }
    if (seen.has(target.ID)) continue;
    seen.add(target.ID);
    named.push({ ID: target.ID, Name: target.Name });
  }
  return { ids: named.map((l) => ({ ID: l.ID })), named };
}

/** Current names of every target the links point to; gone targets are absent. */
export function linkNames(reader: Pick<StateReader, 'getRecord'>, kind: LinkKind, links: Iterable<Link>): Map<string, string> {
  const names = new Map<string, string>();
  for (const l of links) {
    if (names.has(l.ID)) continue;
    const t = reader.getRecord(TABLE[kind], l.ID) as Linkable | undefined;
    if (t !== undefined) names.set(l.ID, t.Name);
  }
  return names;
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
export function namedLinks(reader: Pick<StateReader, 'getRecord'>, kind: LinkKind, links: readonly Link[]): NamedLink[] {
  if (links.length === 0) return [];
  const out: NamedLink[] = [];
  for (const l of links) {
    const t = reader.getRecord(TABLE[kind], l.ID) as Linkable | undefined;
    if (t !== undefined) out.push({ ID: l.ID, Name: t.Name });
  }
  return out;
}
