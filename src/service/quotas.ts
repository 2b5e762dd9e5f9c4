// Quotas (docs/http-api.md, "Quotas"): how many tokens an auth method, a namespace or a partition
// may hold, and how long they may live. Counts are the token table's `quota` index, so a write
// judges them in its own transaction, over every write accepted before it.
import type { z } from 'zod';
import type { quotaBody } from '../api/schemas.js';
import { formatDuration, parseDuration } from '../domain/duration.js';
import { WatchwordError, conflict, invalid, missingTarget, notFound } from '../domain/errors.js';
import type { ExpiryLimits } from '../domain/expiry.js';
import { DEFAULT_NAMESPACE, DEFAULT_PARTITION, isUUID } from '../domain/ids.js';
import { QUOTA_FIELDS, givenFields } from '../domain/records.js';
import type { QuotaRecord, Scope } from '../domain/types.js';
import { type QuotaScopeKind, quotaCountKeys, quotaScopeKey, quotaScopeOf } from '../store/schema.js';
import type { StateReader, Store, TxReader } from '../store/store.js';
import type { AclResolver, Identity } from './acl-resolver.js';
import { audited } from './audited.js';
import type { RequestContext, WriteResult } from './context.js';
import { type AclLevel, requireAcl } from './permissions.js';
import { freshID } from './uniqueness.js';
import { viewOf } from './views.js';

/** A quota as a client sends it, decoded by its schema (durations in milliseconds). */
export type QuotaInput = z.output<typeof quotaBody>;

/** A quota as a caller sees it: the record, and the live tokens it counts here. */
export type QuotaView = Record<string, unknown> & { ID: string; Name: string; Used: number };

/** Quotas are the cluster's: written and read with acl:write / acl:read in the default namespace and partition. */
const QUOTA_SCOPE: Scope = { Partition: DEFAULT_PARTITION, Namespace: DEFAULT_NAMESPACE };

const QUOTA_NAME_RE = /^[A-Za-z0-9\-_]{1,128}$/;
const SCOPE_KINDS: readonly QuotaScopeKind[] = ['AuthMethod', 'Namespace', 'Partition'];
const SCOPE_WORDS: Record<QuotaScopeKind, string> = { AuthMethod: 'auth method', Namespace: 'namespace', Partition: 'partition' };

const badQuota = (message: string) => invalid(`Invalid Quota: ${message}`);
const quotaNotFound = (id: string) => notFound(`Cannot find quota ${JSON.stringify(id)}`);
const missingQuota = (id: string) => missingTarget(`Cannot find quota ${JSON.stringify(id)}`);

/** What a refusal names: the quota and its scope, as an operator reads them. */
const named = (q: QuotaRecord): string => {
  const { kind, name } = quotaScopeOf(q);
  return `quota ${JSON.stringify(q.Name)} (${q.Local ? 'Local tokens of ' : ''}${SCOPE_WORDS[kind]} ${JSON.stringify(name)})`;
};

const exceeded = (message: string) => new WatchwordError('QUOTA_EXCEEDED', message);

const ttlOf = (text: string): number | undefined => (text === '' ? undefined : parseDuration(text));

export function quotaView(q: QuotaRecord, used: number): QuotaView {
  return { ...viewOf(QUOTA_FIELDS, q, { hash: () => '' }), Used: used } as QuotaView;
}

/** A quota's Name and its one scope, as a write and a restore check them (throws the 400). */
function checkNameAndScope(name: string, scope: Partial<Record<QuotaScopeKind, string>>): void {
  if (name === '') throw badQuota('Name is required');
  if (!QUOTA_NAME_RE.test(name)) throw badQuota('Name must be 1-128 letters, digits, dashes and underscores');
  const given = SCOPE_KINDS.filter((k) => (scope[k] ?? '') !== '');
  if (given.length !== 1)
    throw badQuota(
      given.length === 0
        ? 'name its scope: exactly one of AuthMethod, Namespace or Partition'
        : `name exactly one scope, not ${given.join(' and ')}`,
    );
}

/** A quota of a snapshot file, checked as a write would check it (throws the 400). */
export function checkStoredQuota(q: QuotaRecord): void {
  if (!isUUID(q.ID)) throw badQuota(`ID ${JSON.stringify(q.ID.slice(0, 64))} is not a UUID`);
  checkNameAndScope(q.Name, q);
  for (const field of ['MaxTokenTTL', 'MinTokenTTL'] as const)
    if (q[field] !== '' && !((parseDuration(q[field]) ?? -1) > 0))
      throw badQuota(`${field} ${JSON.stringify(q[field].slice(0, 64))} is not a duration`);
}

/** The token a create, a clone or a login is about to write, as far as quotas judge it. */
export interface TokenDraft {
  AuthMethod?: string;
  Namespace: string;
  Partition: string;
  Local: boolean;
}

/** The quotas over a token of this scope, as of the transaction (a Local quota only over a Local token), by name. */
function quotasOver(tx: Pick<TxReader, 'quotasOver'>, t: TokenDraft): QuotaRecord[] {
  const out: QuotaRecord[] = [];
  const scopes: Array<[QuotaScopeKind, string]> = [
    ['Namespace', t.Namespace],
    ['Partition', t.Partition],
  ];
  if (t.AuthMethod) scopes.unshift(['AuthMethod', t.AuthMethod]);
  for (const [kind, name] of scopes)
    for (const q of tx.quotasOver(quotaScopeKey(kind, name, 'quota'))) if (!q.Local || t.Local) out.push(q);
  return out.sort((a, b) => (a.Name.toLowerCase() < b.Name.toLowerCase() ? -1 : 1));
}

/**
 * Admits one more token to every quota over it, inside the transaction that writes it (so the
 * count holds every write accepted before this one), and decides its expiry: a token made with
 * no expiry under a MaxTokenTTL is given that one; a login's is cut to it (its caller does not
 * choose it), an API create's is refused past it. Throws QUOTA_EXCEEDED (429) naming the quota,
 * its scope and its count; answers the expiry (ms), undefined when none.
 */
export function admitToken(
  tx: Pick<TxReader, 'hasQuotas' | 'quotasOver' | 'tokenCountUnder'>,
  t: TokenDraft,
  expires: number | undefined,
  now: number,
  how: 'create' | 'login',
): number | undefined {
  // Most datacenters have no quota: a create or login then pays one look at the table's size.
  if (!tx.hasQuotas()) return expires;
  const over = quotasOver(tx, t);
  // The tightest MaxTokenTTL of them all decides: a token given one quota's would break a shorter one's.
  let tightest: { q: QuotaRecord; ms: number } | undefined;
  for (const q of over) {
    const ms = ttlOf(q.MaxTokenTTL);
    if (ms !== undefined && (tightest === undefined || ms < tightest.ms)) tightest = { q, ms };
  }
  let out = expires;
  if (tightest !== undefined) {
    if (out === undefined || (how === 'login' && out - now > tightest.ms)) out = now + tightest.ms;
    else if (out - now > tightest.ms)
      throw exceeded(
        `Quota exceeded: ${named(tightest.q)} allows tokens of at most ${formatDuration(tightest.ms)}; this one would live ${formatDuration(out - now)}`,
      );
  }
  for (const q of over) {
    const min = ttlOf(q.MinTokenTTL);
    if (min !== undefined && out !== undefined && out - now < min)
      throw exceeded(
        `Quota exceeded: ${named(q)} allows tokens of at least ${formatDuration(min)}; this one would live ${formatDuration(Math.max(0, out - now))}`,
      );
    if (q.MaxTokens !== undefined) {
      const used = tx.tokenCountUnder(quotaCountKeys(q));
      if (used >= q.MaxTokens)
        throw exceeded(`Quota exceeded: ${named(q)} holds ${used} of ${q.MaxTokens} tokens; delete or revoke some, or raise MaxTokens`);
    }
  }
  return out;
}

export class QuotaService {
  constructor(
    private readonly store: Store,
    private readonly resolver: AclResolver,
    private readonly limits: ExpiryLimits,
    /** Features that need every server (FEATURE_NOT_ENABLED until the upgrade is finalized with them). */
    private readonly features?: { require(name: string): void },
  ) {}

  private get reader(): StateReader {
    return this.store.reader;
  }

  /** Quotas are the cluster's, whatever namespace the request names: acl:<level> in the default one. */
  private async authorize(ctx: RequestContext, level: AclLevel): Promise<Identity> {
    const identity = await this.resolver.resolve(ctx.secret, ctx.client);
    requireAcl(identity, level, QUOTA_SCOPE);
    return identity;
  }

  private view(q: QuotaRecord): QuotaView {
    return quotaView(q, this.reader.quotaUsed(q));
  }

  async read(ctx: RequestContext, id: string): Promise<QuotaView> {
    await this.authorize(ctx, 'read');
    const q = isUUID(id) ? this.reader.getQuota(id) : undefined;
    if (!q) throw quotaNotFound(id);
    return this.view(q);
  }

  async list(ctx: RequestContext): Promise<QuotaView[]> {
    await this.authorize(ctx, 'read');
    return this.reader.listQuotas().map((q) => this.view(q));
  }

  /** The record a write makes of a body (throws the 400 naming what is wrong). */
  private content(input: QuotaInput): Omit<QuotaRecord, 'ID' | 'CreateIndex' | 'ModifyIndex'> {
    const name = input.Name ?? '';
    checkNameAndScope(name, input);
    const ttl = (field: 'MaxTokenTTL' | 'MinTokenTTL'): string => {
      const ms = input[field] ?? 0;
      if (ms === 0) return '';
      if (ms < this.limits.minTTL || ms > this.limits.maxTTL)
        throw badQuota(
          `${field} should be between ${formatDuration(this.limits.minTTL)} and ${formatDuration(this.limits.maxTTL)}, or 0 for no limit`,
        );
      return formatDuration(ms);
    };
    const max = ttl('MaxTokenTTL');
    const min = ttl('MinTokenTTL');
    if (max !== '' && min !== '' && (input.MinTokenTTL ?? 0) > (input.MaxTokenTTL ?? 0))
      throw badQuota(`MinTokenTTL (${min}) is longer than MaxTokenTTL (${max})`);
    return {
      ...givenFields(QUOTA_FIELDS, input),
      Name: name,
      AuthMethod: input.AuthMethod ?? '',
      Namespace: input.Namespace ?? '',
      Partition: input.Partition ?? '',
      ...(input.MaxTokens !== undefined ? { MaxTokens: input.MaxTokens } : {}),
      MaxTokenTTL: max,
      MinTokenTTL: min,
      Local: input.Local ?? false,
    } as Omit<QuotaRecord, 'ID' | 'CreateIndex' | 'ModifyIndex'>;
  }

  private static nameFree(tx: Pick<TxReader, 'getQuotaByName'>, name: string, self: string | undefined): void {
    const other = tx.getQuotaByName(name);
    if (other && other.ID !== self) throw conflict(`Invalid Quota: a quota named ${JSON.stringify(other.Name)} already exists`);
  }

  async create(ctx: RequestContext, input: QuotaInput): Promise<WriteResult<QuotaView>> {
    const identity = await this.authorize(ctx, 'write');
    this.features?.require('quotas');
    if (input.ID) throw badQuota('ID must not be set when creating a quota; use PUT /v1/acl/quota/:id to update');
    const content = this.content(input);
    const q = await this.store.transact(
      (tx) => {
        QuotaService.nameFree(tx, content.Name, undefined);
        return tx.put('quotas', { ID: freshID((id) => tx.getQuota(id) !== undefined), ...content });
      },
      audited(ctx, identity, 'quota-create'),
    );
    return { value: this.view(q), index: q.ModifyIndex };
  }

  async update(ctx: RequestContext, id: string, input: QuotaInput): Promise<WriteResult<QuotaView>> {
    const identity = await this.authorize(ctx, 'write');
    this.features?.require('quotas');
    if (input.ID && input.ID !== id) throw badQuota('ID in URL and payload do not match');
    if (!isUUID(id)) throw missingQuota(id);
    const content = this.content(input);
    const q = await this.store.transact(
      (tx) => {
        const existing = tx.getQuota(id);
        if (!existing) throw missingQuota(id);
        if (existing.Local !== content.Local) throw badQuota(`Local cannot change (it is ${existing.Local})`);
        QuotaService.nameFree(tx, content.Name, id);
        return tx.put('quotas', { ID: id, ...content });
      },
      audited(ctx, identity, 'quota-update'),
    );
    return { value: this.view(q), index: q.ModifyIndex };
  }

  async delete(ctx: RequestContext, id: string): Promise<WriteResult<boolean>> {
    const identity = await this.authorize(ctx, 'write');
    if (!isUUID(id)) throw missingQuota(id);
    let index = this.store.currentIndex();
    const deleted = await this.store.transact(
      (tx) => {
        if (!tx.getQuota(id)) return false;
        index = tx.index;
        return tx.del('quotas', id);
      },
      audited(ctx, identity, 'quota-delete'),
    );
    return { value: deleted, index: Math.max(index, 1) };
  }
}
