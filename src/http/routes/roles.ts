import type { FastifyInstance } from 'fastify';
import { decodeBody, parseJsonBody } from '../body.js';
import { queryFlag, queryParam } from '../request.js';
import { requestContext } from '../pipeline.js';
import { sendJSON, sendWrite } from '../respond.js';
import { resource } from '../resource.js';
import { z } from 'zod';
import { DRY_RUN_DOC, deletedResponse, dryRunResponse, roleBody, roleResponse } from '../../api/schemas.js';
import type { AppDeps } from '../deps.js';

/** What the role routes use. */
export type RoleRoutesDeps = Pick<AppDeps, 'roles' | 'reads' | 'dryRun'>;

export async function roleRoutes(app: FastifyInstance, deps: RoleRoutesDeps): Promise<void> {
  const { roles } = deps;

  resource(app, '/v1/acl/role', {
    PUT: {
      doc: { summary: 'Create a role', permission: 'acl:write', body: roleBody, response: roleResponse },
      forward: 'always',
      handler: async (request, reply) => {
        const input = decodeBody(roleBody, parseJsonBody(request.body));
        return sendWrite(request, reply, await roles.create(requestContext(request), input));
      },
    },
  });

  resource(app, '/v1/acl/role/:id', {
    GET: {
      doc: { summary: 'Read a role', permission: 'acl:read', response: roleResponse },
      table: 'roles',
      handler: async (request, reply) => {
        return deps.reads.serve(request, reply, 'roles', 'read', () => roles.read(requestContext(request), request.params.id));
      },
    },
    PUT: {
      doc: {
        summary: 'Update a role (full replacement); with ?dry-run nothing is written and the answer is what it would flip',
        permission: 'acl:write',
        body: roleBody,
        response: z.union([roleResponse, dryRunResponse]),
        query: { 'dry-run': DRY_RUN_DOC },
      },
      forward: 'always',
      handler: async (request, reply) => {
        const input = decodeBody(roleBody, parseJsonBody(request.body));
        if (queryFlag(request, 'dry-run'))
          return sendJSON(request, reply, await roles.dryRun(requestContext(request), request.params.id, input, deps.dryRun));
        return sendWrite(request, reply, await roles.update(requestContext(request), request.params.id, input));
      },
    },
    DELETE: {
      doc: { summary: 'Delete a role', permission: 'acl:write', response: deletedResponse },
      forward: 'always',
      handler: async (request, reply) => sendWrite(request, reply, await roles.delete(requestContext(request), request.params.id)),
    },
  });

  resource(app, '/v1/acl/role/name/:name', {
    GET: {
      doc: { summary: 'Read a role by name', permission: 'acl:read', response: roleResponse },
      table: 'roles',
      handler: async (request, reply) => {
        return deps.reads.serve(request, reply, 'roles', 'read', () => roles.readByName(requestContext(request), request.params.name));
      },
    },
  });

  resource(app, '/v1/acl/roles', {
    GET: {
      doc: {
        summary: 'List roles',
        permission: 'acl:read',
        response: z.array(roleResponse),
        query: { policy: 'Only roles linked to this policy ID' },
      },
      table: 'roles',
      handler: async (request, reply) => {
        const policy = queryParam(request, 'policy');
        return deps.reads.serve(request, reply, 'roles', 'list', () => roles.list(requestContext(request), policy));
      },
    },
  });
}
