import { WatchwordError } from '../domain/errors.js';
import { DEFAULT_NAMESPACE, DEFAULT_PARTITION } from '../domain/ids.js';
import type { Scope } from '../domain/types.js';
import type { Access } from '../domain/rules/decisions.js';
import { explain } from '../domain/rules/explain.js';
import { type Reason, reasonText } from '../domain/rules/explain-types.js';
import type { AclResolver, Identity } from './acl-resolver.js';
import type { RequestContext } from './context.js';
import { type BodyScope, WILDCARD, selectScope } from './scope.js';

export type AclLevel = 'read' | 'write';

function where(scope: Scope): string {
  const parts: string[] = [];
  if (scope.Partition !== DEFAULT_PARTITION) parts.push(`partition "${scope.Partition}"`);
  if (scope.Namespace !== DEFAULT_NAMESPACE) parts.push(`namespace "${scope.Namespace}"`);
  return parts.length > 0 ? ` in ${parts.join(' ')}` : '';
}

export function permissionDenied(identity: Identity, level: AclLevel, scope: Scope): WatchwordError {
  const permission = `acl:${level}`;
  const { reason } = explain(identity.authorizer, 'acl', '', level, scope.Partition, scope.Namespace);
  if (identity.anonymous) {
    return new WatchwordError(
      'PERMISSION_DENIED',
      `Permission denied: anonymous token lacks permission '${permission}'${where(scope)}${decidedBy(reason)}. The anonymous token is ` +
        `used implicitly when a request does not specify a token.`,
      { decision: reason },
    );
  }
  return new WatchwordError(
    'PERMISSION_DENIED',
    `Permission denied: token with AccessorID '${identity.token.AccessorID}' lacks permission '${permission}'${where(scope)}${decidedBy(reason)}`,
    { decision: reason },
  );
}

/** What a 403 adds after the permission lacked: the rule that decided it (docs/operator-insight.md), for the caller's own token. */
const decidedBy = (reason: Reason): string => `; decided by ${reasonText(reason)}`;

/**
 * A 403 for a permission other than acl (operator, agent) that `message` names, with the rule
 * that decided it: `message` is the refusal's words, the reason follows.
 */
export function deniedWithReason(identity: Identity, message: string, resource: string, segment: string, access: Access): WatchwordError {
  const a = identity.authorizer;
  const { reason } = explain(a, resource, segment, access, a.tokenPartition, a.tokenNamespace);
  return new WatchwordError('PERMISSION_DENIED', `${message}${decidedBy(reason)}`, { decision: reason });
}

/** Throws PERMISSION_DENIED unless the identity holds `acl:<level>` in the scope. */
export function requireAcl(identity: Identity, level: AclLevel, scope: Scope): void {
  const ok =
    level === 'write'
      ? identity.authorizer.canWrite(scope.Partition, scope.Namespace)
      : identity.authorizer.canRead(scope.Partition, scope.Namespace);
  if (!ok) throw permissionDenied(identity, level, scope);
}

/**
 * The opening of every use case on one object: who is asking, where (body > query >
 * header > the token's own scope), and whether they hold `acl:<level>` there.
 */
export async function authorize(
  resolver: AclResolver,
  ctx: RequestContext,
  level: AclLevel,
  body?: BodyScope,
): Promise<{ identity: Identity; scope: Scope }> {
  const identity = await resolver.resolve(ctx.secret, ctx.client);
  const scope = selectScope(identity, ctx.hints, body);
  requireAcl(identity, level, scope);
  return { identity, scope };
}

/**
 * Whether the caller may read what lives in a scope. The one filter of every answer that lists
 * tokens or what they did (token lists, unused-since, who can, dry runs): a token, its
 * AccessorID and the checks asked for it are shown only where the caller holds acl:read.
 */
export function readableBy(identity: Identity): (o: Scope) => boolean {
  return (o) => identity.authorizer.canRead(o.Partition, o.Namespace);
}

/**
 * The opening of every list: one namespace (acl:read needed there) or `ns=*`, meaning
 * every namespace the caller may read. For `ns=*`, `namespacesOf` names the namespaces
 * that hold objects, and only the readable ones are returned, so a caller who may read
 * nothing makes the list load nothing. `canSee` re-checks each object.
 */
export async function authorizeList(
  resolver: AclResolver,
  ctx: RequestContext,
  namespacesOf?: (partition: string) => string[],
): Promise<{ identity: Identity; scope: Scope; namespaces: string[]; canSee: (o: Scope) => boolean }> {
  const identity = await resolver.resolve(ctx.secret, ctx.client);
  const scope = selectScope(identity, ctx.hints, undefined, true);
  if (scope.Namespace !== WILDCARD) {
    requireAcl(identity, 'read', scope);
    return { identity, scope, namespaces: [scope.Namespace], canSee: () => true };
  }
  const readable = namespacesOf?.(scope.Partition).filter((ns) => identity.authorizer.canRead(scope.Partition, ns)) ?? [];
  return { identity, scope, namespaces: readable, canSee: readableBy(identity) };
}
