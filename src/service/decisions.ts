import { invalid } from '../domain/errors.js';
import { type Access, RESOURCES } from '../domain/rules/decisions.js';
import type { AclResolver, Identity } from './acl-resolver.js';
import type { RequestContext } from './context.js';
import { selectScope } from './scope.js';

/** One question: may the request's token have `Access` to `Resource` (`Segment`)? */
export interface AuthorizationCheck {
  Resource: string;
  Segment?: string;
  Access: string;
  Namespace?: string;
  Partition?: string;
}

/** The check as asked, with the answer. */
export interface AuthorizationAnswer extends AuthorizationCheck {
  Allow: boolean;
}

export const MAX_CHECKS = 64;
const MAX_SEGMENT = 4096;

const FIELDS = new Map(['Resource', 'Segment', 'Access', 'Namespace', 'Partition'].map((f) => [f.toLowerCase(), f]));

function fail(i: number, message: string): never {
  throw invalid(`checks[${i}]: ${message}`);
}

/** One element of the request: its fields matched case-insensitively, each checked, the resource and access known. */
function parseCheck(raw: unknown, i: number): AuthorizationCheck & { access: Access } {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) fail(i, 'must be an object {"Resource", "Segment", "Access"}');
  const check: Record<string, unknown> = {};
  for (const key of Object.keys(raw)) {
    const name = FIELDS.get(key.toLowerCase());
    if (name === undefined) fail(i, `unknown field ${JSON.stringify(key)}`);
    if (Object.hasOwn(check, name)) fail(i, `field ${JSON.stringify(name)} is given more than once`);
    const value = (raw as Record<string, unknown>)[key];
    if (value === null || value === undefined) continue;
    if (typeof value !== 'string') fail(i, `${name} must be a string`);
    check[name] = value;
  }
  const resource = check.Resource as string | undefined;
  if (resource === undefined || resource === '') fail(i, 'Resource is required');
  const spec = Object.hasOwn(RESOURCES, resource) ? RESOURCES[resource] : undefined;
  if (spec === undefined) fail(i, `unknown resource ${JSON.stringify(resource)}; one of ${Object.keys(RESOURCES).join(', ')}`);
  const accessText = check.Access as string | undefined;
  if (accessText === undefined || accessText === '') fail(i, 'Access is required');
  // Consul lower-cases the access level.
  const access = accessText.toLowerCase() as Access;
  if (!spec.accesses.includes(access)) fail(i, `access ${JSON.stringify(accessText)} is not one of ${spec.accesses.join(', ')} for resource ${JSON.stringify(resource)}`);
  const segment = check.Segment as string | undefined;
  if (spec.segmented && segment === undefined) fail(i, `resource ${JSON.stringify(resource)} needs a Segment (the name of the ${resource})`);
  if (segment !== undefined && segment.length > MAX_SEGMENT) fail(i, `Segment is longer than ${MAX_SEGMENT} characters`);
  return { ...(check as unknown as AuthorizationCheck), access };
}

/** The request body: an array of 1 to 64 checks. A 400 names the first bad element. */
export function parseChecks(body: unknown): Array<AuthorizationCheck & { access: Access }> {
  if (!Array.isArray(body)) throw invalid('Request decode failed: the body must be a JSON array of checks [{"Resource", "Segment", "Access"}]');
  if (body.length === 0) throw invalid('Request decode failed: at least one check is required');
  if (body.length > MAX_CHECKS) throw invalid(`Request decode failed: at most ${MAX_CHECKS} checks per request, got ${body.length}`);
  return body.map(parseCheck);
}

/** Judges checks for the request's token (SPEC §17): the authorization service's question. */
export class DecisionService {
  constructor(private readonly resolver: AclResolver) {}

  /** Needs no permission: any token may ask what it may do. An unknown secret is 403 ACL not found. */
  async authorize(ctx: RequestContext, body: unknown): Promise<AuthorizationAnswer[]> {
    const checks = parseChecks(body);
    const identity = await this.resolver.resolve(ctx.secret, ctx.client);
    return judge(identity, checks, ctx);
  }
}

function judge(identity: Identity, checks: Array<AuthorizationCheck & { access: Access }>, ctx: RequestContext): AuthorizationAnswer[] {
  const out: AuthorizationAnswer[] = new Array(checks.length);
  for (let i = 0; i < checks.length; i++) {
    const { access, ...check } = checks[i] as AuthorizationCheck & { access: Access };
    let place: { Partition: string; Namespace: string };
    try {
      place = selectScope(identity, ctx.hints, check);
    } catch (err) {
      fail(i, (err as Error).message);
    }
    const allowed = identity.authorizer.allows(check.Resource, check.Segment ?? '', access, place.Partition, place.Namespace);
    out[i] = { ...check, Allow: allowed };
  }
  return out;
}
