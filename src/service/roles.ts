import { type GrantLimit, withProposed } from './grant-limit.js';
import { ROLE_FIELDS, givenFields } from '../domain/records.js';
import { audited } from './audited.js';
import type { z } from 'zod';
import type { roleBody } from '../api/schemas.js';
import { invalid, missingTarget, notFound } from '../domain/errors.js';
import { normalizeNodeIdentities, normalizeServiceIdentities, normalizeTemplatedPolicies } from '../domain/grants.js';
import { roleHash } from '../domain/hash.js';
import { filterID, isUUID } from '../domain/ids.js';
import type { RoleRecord, Scope } from '../domain/types.js';

import type { StateReader, Store, TxReader } from '../store/store.js';
import type { AclResolver } from './acl-resolver.js';
import type { RequestContext, WriteResult } from './context.js';
import { type LinkReader, linkNames, nameLinks, namedLinks, resolveLinks } from './links.js';
import type { DryRunAnswer, DryRunService } from './dry-run.js';
import { authorize, authorizeList, readableBy } from './permissions.js';
import { checkNameFree, freshID } from './uniqueness.js';
import { type RoleView, roleView } from './views.js';

/** Role as a client sends it, decoded by its schema (the schema is the one definition). */
export type RoleInput = z.output<typeof roleBody>;

const ROLE_NAME_RE = /^[A-Za-z0-9\-_]{1,256}$/;

const notFoundRole = (what: string) => notFound(`Cannot find role ${what}`);
const missingRole = (id: string) => missingTarget(`Cannot find role ${JSON.stringify(id)}`);

const inScope = (r: RoleRecord | undefined, scope: Scope): RoleRecord | undefined =>
  r && r.Namespace === scope.Namespace && r.Partition === scope.Partition ? r : undefined;

function checkRoleName(name: string | undefined): string {
  if (name === undefined || name === '') throw invalid('Invalid Role: no Name is set');
  if (!ROLE_NAME_RE.test(name))
    throw invalid("Invalid Role: invalid Name. Only alphanumeric characters, '-' and '_' are allowed, at most 256 characters");
  return name;
}

export class RoleService {
  constructor(
    private readonly store: Store,
    private readonly resolver: AclResolver,
    /** acl_grant_limit: what a caller may grant (grant-limit.ts); unset, anything (Consul's behaviour). */
    private readonly grants?: Pick<GrantLimit, 'role'>,
  ) {}

  private get reader(): StateReader {
    return this.store.reader;
  }

  /** The response view: policy names resolved now, dangling links dropped. */
  view(role: RoleRecord): RoleView {
    return roleView(role, namedLinks(this.reader, 'policy', role.Policies));
  }

  async read(ctx: RequestContext, id: string): Promise<RoleView> {
    const { scope } = await authorize(this.resolver, ctx, 'read');
    const role = isUUID(id) ? inScope(this.reader.getRole(id), scope) : undefined;
    if (!role) throw notFoundRole(JSON.stringify(id));
    return this.view(role);
  }

  async readByName(ctx: RequestContext, name: string): Promise<RoleView> {
    const { scope } = await authorize(this.resolver, ctx, 'read');
    const role = this.reader.getRoleByName(scope, name);
    if (!role) throw notFoundRole(`with name ${JSON.stringify(name)}`);
    return this.view(role);
  }

  async list(ctx: RequestContext, policy: string | undefined): Promise<RoleView[]> {
    const { scope, namespaces, canSee } = await authorizeList(this.resolver, ctx, (p) => this.reader.namespacesOf('roles', p));
    const policyID = filterID('policy', policy);
    if (namespaces.length === 0) return [];
    const roles = this.reader.listRoles(scope.Partition, namespaces, policyID);
    const visible = roles.filter(canSee);
    const names = linkNames(
      this.reader,
      'policy',
      visible.flatMap((r) => r.Policies),
    );
    return visible.map((r) => roleView(r, nameLinks(r.Policies, names)));
  }

  /** Validated content of a role body, links resolved in the role's scope (with their names, for the view). */
  private content(tx: LinkReader, input: RoleInput, scope: Scope) {
    const policies = resolveLinks(tx, 'policy', input.Policies, scope);
    return {
      content: {
        Name: checkRoleName(input.Name),
        Description: input.Description ?? '',
        Policies: policies.ids,
        ServiceIdentities: normalizeServiceIdentities(input.ServiceIdentities ?? [], 'role', false),
        NodeIdentities: normalizeNodeIdentities(input.NodeIdentities ?? [], 'role'),
        TemplatedPolicies: normalizeTemplatedPolicies(input.TemplatedPolicies ?? [], 'role', false),
      },
      named: policies.named,
    };
  }

  async create(ctx: RequestContext, input: RoleInput): Promise<WriteResult<RoleView>> {
    const { identity, scope } = await authorize(this.resolver, ctx, 'write', input);
    if (input.ID) throw invalid('Invalid Role: ID must not be set when creating a role; use PUT /v1/acl/role/:id to update');
    checkRoleName(input.Name);
    const { role, named } = await this.store.transact(
      (tx) => {
        checkNameFree(tx, 'role', scope, input.Name as string, undefined);
        const { content, named } = this.content(tx, input, scope);
        const ID = freshID((id) => tx.getRole(id) !== undefined);
        const given = givenFields(ROLE_FIELDS, input);
        const record = tx.put('roles', {
          ID,
          ...given,
          ...content,
          Hash: roleHash(content),
          Namespace: scope.Namespace,
          Partition: scope.Partition,
        });
        this.grants?.role(identity, record, tx);
        return { role: record, named };
      },
      audited(ctx, identity, 'role-create'),
    );
    return { value: roleView(role, named), index: role.ModifyIndex };
  }

  async update(ctx: RequestContext, id: string, input: RoleInput): Promise<WriteResult<RoleView>> {
    const { identity, scope } = await authorize(this.resolver, ctx, 'write', input);
    if (input.ID && input.ID !== id) throw invalid('Role ID in URL and payload do not match');
    if (!isUUID(id)) throw missingRole(id);
    checkRoleName(input.Name);
    const { role, named } = await this.store.transact(
      (tx) => {
        const { record, named } = this.updated(tx, id, input, scope);
        const role = tx.put('roles', record);
        this.grants?.role(identity, role, tx);
        return { role, named };
      },
      audited(ctx, identity, 'role-update'),
    );
    return { value: roleView(role, named), index: role.ModifyIndex };
  }

  /** The role an update would write, every check made (in a transaction, or against the state now for a dry run). */
  private updated(reader: LinkReader & Pick<TxReader, 'getRole'>, id: string, input: RoleInput, scope: Scope) {
    const existing = inScope(reader.getRole(id), scope);
    if (!existing) throw missingRole(id);
    const { content, named } = this.content(reader, input, scope);
    if (content.Name.toLowerCase() !== existing.Name.toLowerCase()) checkNameFree(reader, 'role', scope, content.Name, id);
    // Full replacement: what the body leaves out is cleared.
    return { record: { ...existing, ...givenFields(ROLE_FIELDS, input), ...content, Hash: roleHash(content) } as RoleRecord, named };
  }

  /** `?dry-run`: the update checked as it would be, nothing written; what it would flip (docs/operator-insight.md). */
  async dryRun(ctx: RequestContext, id: string, input: RoleInput, dryRun: DryRunService): Promise<DryRunAnswer> {
    const { identity, scope } = await authorize(this.resolver, ctx, 'write', input);
    if (input.ID && input.ID !== id) throw invalid('Role ID in URL and payload do not match');
    if (!isUUID(id)) throw missingRole(id);
    checkRoleName(input.Name);
    const next = this.updated(this.store.reader, id, input, scope).record;
    this.grants?.role(identity, next, withProposed(this.store.reader, 'roles', next));
    return dryRun.roleChange(next, readableBy(identity));
  }

  async delete(ctx: RequestContext, id: string): Promise<WriteResult<boolean>> {
    const { identity, scope } = await authorize(this.resolver, ctx, 'write');
    // A malformed ID cannot name an object: refused as an update of it is (a well-formed one that names nothing answers false).
    if (!isUUID(id)) throw missingRole(id);
    let index = this.store.currentIndex();
    const deleted = await this.store.transact(
      (tx) => {
        if (!inScope(tx.getRole(id), scope)) return false;
        index = tx.index;
        // Token links to it stay stored and are dropped at read time.
        return tx.del('roles', id);
      },
      audited(ctx, identity, 'role-delete'),
    );
    return { value: deleted, index: Math.max(index, 1) };
  }
}
