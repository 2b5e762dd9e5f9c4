// Binding rules: which identities of an auth method get which roles, policies and identities.
import { BINDING_RULE_FIELDS, givenFields } from '../domain/records.js';
import { audited } from './audited.js';
import type { z } from 'zod';
import type { bindingRuleBody } from '../api/schemas.js';
import { BIND_TYPES, type BindType, checkRuleFields } from '../auth/binder.js';
import type { Selectors } from '../auth/selectors.js';
import { SelectorError } from '../domain/selector.js';
import { invalid, missingTarget, notFound } from '../domain/errors.js';
import { isUUID } from '../domain/ids.js';
import type { AuthMethodRecord, BindingRuleRecord, Scope } from '../domain/types.js';
import type { StateReader, Store, Tx } from '../store/store.js';
import type { AclResolver } from './acl-resolver.js';
import type { RequestContext, WriteResult } from './context.js';
import { authorize, authorizeList } from './permissions.js';
import { inScope } from './scope.js';
import { freshID } from './uniqueness.js';

/** BindingRule as a client sends it, decoded by its schema (the schema is the one definition). */
export type BindingRuleInput = z.output<typeof bindingRuleBody>;

const badRule = (message: string) => invalid(`Invalid Binding Rule: ${message}`);
const ruleNotFound = (id: string) => notFound(`Cannot find binding rule ${JSON.stringify(id)}`);
const missingRule = (id: string) => missingTarget(`Cannot find binding rule ${JSON.stringify(id)}`);

/**
 * A rule's BindType, BindName, Selector and BindVars checked under its method, as the API checks
 * them on a write and on a restored record; throws the 400.
 */
export function checkRule(
  method: AuthMethodRecord,
  r: { BindType: string; BindName: string; Selector: string; BindVars?: { name?: string } | undefined },
): void {
  if (r.BindType === '') throw badRule('BindType is required');
  if (!BIND_TYPES.includes(r.BindType as BindType))
    throw badRule(`BindType ${JSON.stringify(r.BindType)} is not one of: ${BIND_TYPES.join(', ')}`);
  if (r.BindName === '') throw badRule('BindName is required');
  checkRuleFields(method, r.Selector, r.BindName, r.BindVars, badRule);
}

/** A selector's patterns checked by the selector thread: its 400 (`Invalid Binding Rule: invalid Selector: …`) names the clause. */
export async function checkSelectorText(selectors: Pick<Selectors, 'check'>, selector: string): Promise<void> {
  try {
    await selectors.check(selector);
  } catch (err) {
    if (err instanceof SelectorError) throw badRule(`invalid Selector: ${err.message}`);
    throw err;
  }
}

export class BindingRuleService {
  constructor(
    private readonly store: Store,
    private readonly resolver: AclResolver,
    private readonly selectors: Pick<Selectors, 'check'>,
  ) {}

  /** The selector's regular expressions compiled and bounded (off the event loop) before the write's transaction. */
  private async checkSelector(input: BindingRuleInput): Promise<void> {
    await checkSelectorText(this.selectors, input.Selector ?? '');
  }

  private get reader(): StateReader {
    return this.store.reader;
  }

  async read(ctx: RequestContext, id: string): Promise<BindingRuleRecord> {
    const { scope } = await authorize(this.resolver, ctx, 'read');
    const rule = isUUID(id) ? inScope(this.reader.getBindingRule(id), scope) : undefined;
    if (!rule) throw ruleNotFound(id);
    return rule;
  }

  async list(ctx: RequestContext, authMethod: string | undefined): Promise<BindingRuleRecord[]> {
    const { scope, namespaces, canSee } = await authorizeList(this.resolver, ctx, (p) => this.reader.namespacesOf('bindingRules', p));
    if (namespaces.length === 0) return [];
    return this.reader.listBindingRules(scope.Partition, namespaces, authMethod || undefined).filter(canSee);
  }

  private content(tx: Tx, input: BindingRuleInput, scope: Scope, method: string) {
    const m = tx.getAuthMethod(scope, method);
    if (!m) throw badRule(`auth method ${JSON.stringify(method)} does not exist`);
    const bindType = input.BindType ?? '';
    const bindName = input.BindName ?? '';
    const selector = input.Selector ?? '';
    const bindVars = input.BindVars?.name !== undefined ? { name: input.BindVars.name } : undefined;
    checkRule(m, { BindType: bindType, BindName: bindName, Selector: selector, BindVars: bindVars });
    return {
      ...givenFields(BINDING_RULE_FIELDS, input),
      Description: input.Description ?? '',
      AuthMethod: method,
      Selector: selector,
      BindType: bindType as BindType,
      BindName: bindName,
      ...(bindVars ? { BindVars: bindVars } : {}),
      Namespace: scope.Namespace,
      Partition: scope.Partition,
    };
  }

  async create(ctx: RequestContext, input: BindingRuleInput): Promise<WriteResult<BindingRuleRecord>> {
    const { identity, scope } = await authorize(this.resolver, ctx, 'write', input);
    if (input.ID) throw badRule('ID must not be set when creating a binding rule; use PUT /v1/acl/binding-rule/:id to update');
    const method = input.AuthMethod ?? '';
    if (method === '') throw badRule('AuthMethod is required');
    await this.checkSelector(input);
    const rule = await this.store.transact(
      (tx) => {
        const content = this.content(tx, input, scope, method);
        return tx.put('bindingRules', { ID: freshID((id) => tx.getBindingRule(id) !== undefined), ...content });
      },
      audited(ctx, identity, 'binding-rule-create'),
    );
    return { value: rule, index: rule.ModifyIndex };
  }

  async update(ctx: RequestContext, id: string, input: BindingRuleInput): Promise<WriteResult<BindingRuleRecord>> {
    const { identity, scope } = await authorize(this.resolver, ctx, 'write', input);
    if (input.ID && input.ID !== id) throw badRule('ID in URL and payload do not match');
    if (!isUUID(id)) throw missingRule(id);
    await this.checkSelector(input);
    const rule = await this.store.transact(
      (tx) => {
        const existing = inScope(tx.getBindingRule(id), scope);
        if (!existing) throw missingRule(id);
        if (input.AuthMethod && input.AuthMethod !== existing.AuthMethod)
          throw badRule(`the AuthMethod of a binding rule cannot change (it is ${JSON.stringify(existing.AuthMethod)})`);
        const content = this.content(tx, input, scope, existing.AuthMethod);
        return tx.put('bindingRules', { ID: id, ...content });
      },
      audited(ctx, identity, 'binding-rule-update'),
    );
    return { value: rule, index: rule.ModifyIndex };
  }

  async delete(ctx: RequestContext, id: string): Promise<WriteResult<boolean>> {
    const { identity, scope } = await authorize(this.resolver, ctx, 'write');
    // A malformed ID cannot name an object: refused as an update of it is (a well-formed one that names nothing answers false).
    if (!isUUID(id)) throw missingRule(id);
    let index = this.store.currentIndex();
    const deleted = await this.store.transact(
      (tx) => {
        if (!inScope(tx.getBindingRule(id), scope)) return false;
        index = tx.index;
        return tx.del('bindingRules', id);
      },
      audited(ctx, identity, 'binding-rule-delete'),
    );
    return { value: deleted, index: Math.max(index, 1) };
  }
}
