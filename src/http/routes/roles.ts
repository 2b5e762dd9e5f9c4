import type { FastifyInstance } from 'fastify';
import { roleBody, roleResponse } from '../../api/schemas.js';
import type { AppDeps } from '../deps.js';
import { queryParam } from '../request.js';
import { aclObjectRoutes } from './acl-object.js';

/** What the role routes use. */
export type RoleRoutesDeps = Pick<AppDeps, 'roles' | 'reads' | 'dryRun'>;

export async function roleRoutes(app: FastifyInstance, deps: RoleRoutesDeps): Promise<void> {
  aclObjectRoutes(app, deps, {
    one: 'role',
    many: 'roles',
    body: roleBody,
    response: roleResponse,
    service: deps.roles,
    nameFrom: 'segment',
    list: {
      query: { policy: 'Only roles linked to this policy ID' },
      run: (ctx, request) => deps.roles.list(ctx, queryParam(request, 'policy')),
    },
  });
}
