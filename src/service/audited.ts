import type { AuditActor } from '../observability/audit.js';
import type { TransactOptions } from '../store/store.js';
import type { Identity } from './acl-resolver.js';
import type { RequestContext } from './context.js';
import type { AuditType } from '../domain/audit-types.js';

/** Who made a request, for its audit line: the request's own facts and the caller's accessor. */
export function actorOf(ctx: RequestContext, identity: Identity | undefined): AuditActor {
  const r = ctx.request;
  return {
    RequestID: r?.id ?? '',
    AccessorID: identity === undefined || identity.anonymous ? 'anonymous' : identity.token.AccessorID,
    RemoteAddr: r?.remote ?? ctx.client ?? '',
    ...(r?.via !== undefined ? { ViaAddr: r.via } : {}),
    Method: r?.method ?? '',
    Path: r?.path ?? '',
  };
}

/** The transaction options of an audited change (docs/audit.md: Audit log). */
export function audited(
  ctx: RequestContext,
  identity: Identity | undefined,
  type: AuditType,
  details?: Record<string, unknown>,
): TransactOptions {
  return { audit: { type, actor: actorOf(ctx, identity), ...(details ? { details } : {}) } };
}
