import type { FastifyInstance } from 'fastify';
import { decodeBody, parseJsonBody } from '../body.js';
import { queryParam, requestContext } from '../request.js';
import { sendJSON, sendWrite } from '../respond.js';
import { type RouteInfo, resource } from '../routes.js';
import { roleBody } from '../../api/schemas.js';
import type { AppDeps } from '../app.js';

export function roleRoutes(app: FastifyInstance, deps: AppDeps, registry: RouteInfo[]): void {
  const { roles } = deps;

  resource(app, '/v1/acl/role', {
    PUT: {
      handler: async (request, reply) => {
        const input = decodeBody(roleBody, parseJsonBody(request.body));
        return sendWrite(request, reply, await roles.create(requestContext(request), input));
      },
    },
  }, registry);

  resource(app, '/v1/acl/role/:id', {
    GET: {
      table: 'roles',
      handler: async (request, reply) => {
        await deps.reads.prepare(request, reply, 'roles');
        return sendJSON(request, reply, await roles.read(requestContext(request), (request.params as { id: string }).id));
      },
    },
    PUT: {
      handler: async (request, reply) => {
        const input = decodeBody(roleBody, parseJsonBody(request.body));
        return sendWrite(request, reply, await roles.update(requestContext(request), (request.params as { id: string }).id, input));
      },
    },
    DELETE: {
      handler: async (request, reply) => sendWrite(request, reply, await roles.delete(requestContext(request), (request.params as { id: string }).id)),
    },
  }, registry);

  resource(app, '/v1/acl/role/name/:name', {
    GET: {
      table: 'roles',
      handler: async (request, reply) => {
        await deps.reads.prepare(request, reply, 'roles');
        return sendJSON(request, reply, await roles.readByName(requestContext(request), (request.params as { name: string }).name));
      },
    },
  }, registry);

  resource(app, '/v1/acl/roles', {
    GET: {
      table: 'roles',
      handler: async (request, reply) => {
        const policy = queryParam(request, 'policy');
        await deps.reads.prepare(request, reply, 'roles');
        return sendJSON(request, reply, await roles.list(requestContext(request), policy));
      },
    },
  }, registry);
}
