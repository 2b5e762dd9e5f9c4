import { POLICY_FIELDS, givenFields } from '../domain/records.js';
import { audited } from './audited.js';
import type { z } from 'zod';
import type { policyBody } from '../api/schemas.js';
import { isBuiltinPolicyID } from '../domain/builtins.js';
import { invalid, missingTarget, notFound, notPermitted } from '../domain/errors.js';
import { policyHash } from '../domain/hash.js';
import { isUUID } from '../domain/ids.js';
import { checkBuiltinPolicyUpdate, checkPolicyDatacenters, checkPolicyName, checkPolicyRules } from '../domain/policy-object.js';
import type { PolicyRecord, Scope } from '../domain/types.js';
import type { Store, TxReader } from '../store/store.js';
import type { DryRunAnswer, DryRunService } from './dry-run.js';
import { type GrantLimit, withProposed } from './grant-limit.js';
import type { AclResolver } from './acl-resolver.js';
import type { RequestContext, WriteResult } from './context.js';
import { authorize, authorizeList, readableBy } from './permissions.js';
import { checkNameFree, freshID } from './uniqueness.js';
import { type PolicyView, policyView } from './views.js';

/** Policy as a client sends it, decoded by its schema (the schema is the one definition). */
export type PolicyInput = z.output<typeof policyBody>;

const notFoundPolicy = (what: string) => notFound(`Cannot find policy ${what}`);
const missingPolicy = (id: string) => missingTarget(`Cannot find policy ${JSON.stringify(id)}`);

const inScope = (p: PolicyRecord | undefined, scope: Scope): PolicyRecord | undefined =>
  p && p.Namespace === scope.Namespace && p.Partition === scope.Partition ? p : undefined;

export class PolicyService {
  constructor(
    private readonly store: Store,
    private readonly resolver: AclResolver,
    /** acl_grant_limit: what a caller may grant (grant-limit.ts); unset, anything (Consul's behaviour). */
    private readonly grants?: Pick<GrantLimit, 'policy'>,
  ) {}

  async read(ctx: RequestContext, id: string): Promise<PolicyView> {
    const { scope } = await authorize(this.resolver, ctx, 'read');
    const policy = isUUID(id) ? inScope(this.store.reader.getPolicy(id), scope) : undefined;
    if (!policy) throw notFoundPolicy(JSON.stringify(id));
    return policyView(policy);
  }

  async readByName(ctx: RequestContext, name: string): Promise<PolicyView> {
    const { scope } = await authorize(this.resolver, ctx, 'read');
    const policy = this.store.reader.getPolicyByName(scope, name);
    if (!policy) throw notFoundPolicy(`with name ${JSON.stringify(name)}`);
    return policyView(policy);
  }

  async list(ctx: RequestContext): Promise<PolicyView[]> {
    const { scope, namespaces, canSee } = await authorizeList(this.resolver, ctx, (p) => this.store.reader.namespacesOf('policies', p));
    if (namespaces.length === 0) return [];
    const policies = this.store.reader.listPolicies(scope.Partition, namespaces);
    return policies.filter(canSee).map((p) => policyView(p, false));
  }

  async create(ctx: RequestContext, input: PolicyInput): Promise<WriteResult<PolicyView>> {
    const { identity, scope } = await authorize(this.resolver, ctx, 'write', input);
    if (input.ID) throw invalid('Invalid Policy: ID must not be set when creating a policy; use PUT /v1/acl/policy/:id to update');
    const fields = checkFields(input);
    checkPolicyName(fields.Name);
    const policy = await this.store.transact(
      (tx) => {
        checkNameFree(tx, 'policy', scope, fields.Name, undefined);
        const ID = freshID((id) => tx.getPolicy(id) !== undefined);
        const given = givenFields(POLICY_FIELDS, input);
        const policy = tx.put('policies', {
          ID,
          ...given,
          ...fields,
          Hash: policyHash(fields),
          Namespace: scope.Namespace,
          Partition: scope.Partition,
        });
        this.grants?.policy(identity, policy, tx);
        return policy;
      },
      audited(ctx, identity, 'policy-create'),
    );
    return { value: policyView(policy), index: policy.ModifyIndex };
  }

  async update(ctx: RequestContext, id: string, input: PolicyInput): Promise<WriteResult<PolicyView>> {
    const { identity, scope } = await authorize(this.resolver, ctx, 'write', input);
    if (input.ID && input.ID !== id) throw invalid('Policy ID in URL and payload do not match');
    if (!isUUID(id)) throw missingPolicy(id);
    const fields = checkFields(input);
    const policy = await this.store.transact(
      (tx) => {
        const policy = tx.put('policies', updatedPolicy(tx, id, input, fields, scope));
        this.grants?.policy(identity, policy, tx);
        return policy;
      },
      audited(ctx, identity, 'policy-update'),
    );
    return { value: policyView(policy), index: policy.ModifyIndex };
  }

  /**
   * `?dry-run`: the update checked as it would be (the same refusals), nothing written; what it
   * would flip of the checks recently asked for the tokens it reaches (docs/operator-insight.md).
   */
  async dryRun(ctx: RequestContext, id: string, input: PolicyInput, dryRun: DryRunService): Promise<DryRunAnswer> {
    const { identity, scope } = await authorize(this.resolver, ctx, 'write', input);
    if (input.ID && input.ID !== id) throw invalid('Policy ID in URL and payload do not match');
    if (!isUUID(id)) throw missingPolicy(id);
    const next = updatedPolicy(this.store.reader, id, input, checkFields(input), scope);
    this.grants?.policy(identity, next, withProposed(this.store.reader, 'policies', next));
    return dryRun.policyChange(next, readableBy(identity));
  }

  async delete(ctx: RequestContext, id: string): Promise<WriteResult<boolean>> {
    const { identity, scope } = await authorize(this.resolver, ctx, 'write');
    // A malformed ID cannot name an object: refused as an update of it is (a well-formed one that names nothing answers false).
    if (!isUUID(id)) throw missingPolicy(id);
    let index = this.store.currentIndex();
    const deleted = await this.store.transact(
      (tx) => {
        const existing = inScope(tx.getPolicy(id), scope);
        if (!existing) return false;
        if (isBuiltinPolicyID(id)) throw notPermitted(`Delete operation not permitted on the builtin ${existing.Name} policy`);
        index = tx.index;
        // Links to it stay in tokens and roles and are dropped at read time.
        return tx.del('policies', id);
      },
      audited(ctx, identity, 'policy-delete'),
    );
    return { value: deleted, index: Math.max(index, 1) };
  }
}

/** The policy an update would write, every check made (in a transaction, or against the state now for a dry run). */
function updatedPolicy(
  reader: Pick<TxReader, 'getPolicy' | 'getPolicyByName' | 'getRoleByName'>,
  id: string,
  input: PolicyInput,
  fields: ReturnType<typeof checkFields>,
  scope: Scope,
): PolicyRecord {
  const existing = inScope(reader.getPolicy(id), scope);
  if (!existing) throw missingPolicy(id);
  // A built-in keeps its reserved name without tripping the "builtin/" rule.
  if (!(isBuiltinPolicyID(id) && fields.Name === existing.Name)) checkPolicyName(fields.Name);
  checkBuiltinPolicyUpdate(existing, fields);
  if (fields.Name.toLowerCase() !== existing.Name.toLowerCase()) checkNameFree(reader, 'policy', scope, fields.Name, id);
  const record: PolicyRecord = { ...existing, ...givenFields(POLICY_FIELDS, input), ...fields, Hash: policyHash(fields) };
  if (fields.Datacenters === undefined) delete record.Datacenters;
  return record;
}

function checkFields(input: PolicyInput): Pick<PolicyRecord, 'Name' | 'Description' | 'Rules' | 'Datacenters'> {
  const name = input.Name ?? '';
  if (name === '') throw invalid('Invalid Policy: no Name is set');
  const rules = input.Rules ?? '';
  checkPolicyRules(rules);
  const dcs = input.Datacenters ?? [];
  checkPolicyDatacenters(dcs);
  return {
    Name: name,
    Description: input.Description ?? '',
    Rules: rules,
    ...(dcs.length > 0 ? { Datacenters: [...new Set(dcs)] } : {}),
  };
}
