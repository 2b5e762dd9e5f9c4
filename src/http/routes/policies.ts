import type { FastifyInstance } from 'fastify';
import { policyBody, policyResponse } from '../../api/schemas.js';
import type { AppDeps } from '../deps.js';
import { aclObjectRoutes } from './acl-object.js';

/** What the policy routes use. */
export type PolicyRoutesDeps = Pick<AppDeps, 'policies' | 'reads' | 'dryRun'>;

export async function policyRoutes(app: FastifyInstance, deps: PolicyRoutesDeps): Promise<void> {
  aclObjectRoutes(app, deps, {
    one: 'policy',
    many: 'policies',
    body: policyBody,
    response: policyResponse,
    service: deps.policies,
    // A policy's name may hold one `/` (`team/web`): its by-name read takes the rest of the path.
    nameFrom: 'rest',
    list: { summary: 'List policies (without their rules)', run: (ctx) => deps.policies.list(ctx) },
  });
}
