import type { FastifyInstance } from 'fastify';
import { decodeBody, parseJsonBody } from '../body.js';
import { requestContext } from '../request.js';
import { sendJSON, sendWrite } from '../respond.js';
import { type RouteInfo, resource } from '../routes.js';
import { policyBody } from '../../api/schemas.js';
import type { AppDeps } from '../app.js';

export function policyRoutes(app: FastifyInstance, deps: AppDeps, registry: RouteInfo[]): void {
  const { policies } = deps;

  resource(app, '/v1/acl/policy', {
    PUT: {
      handler: async (request, reply) => {
        const input = decodeBody(policyBody, parseJsonBody(request.body));
        return sendWrite(request, reply, await policies.create(requestContext(request), input));
      },
    },
  }, registry);

  resource(app, '/v1/acl/policy/:id', {
    GET: {
      table: 'policies',
      handler: async (request, reply) => {
        await deps.reads.prepare(request, reply, 'policies');
        return sendJSON(request, reply, await policies.read(requestContext(request), (request.params as { id: string }).id));
      },
    },
    PUT: {
      handler: async (request, reply) => {
        const input = decodeBody(policyBody, parseJsonBody(request.body));
        return sendWrite(request, reply, await policies.update(requestContext(request), (request.params as { id: string }).id, input));
      },
    },
    DELETE: {
      handler: async (request, reply) => {
        return sendWrite(request, reply, await policies.delete(requestContext(request), (request.params as { id: string }).id));
      },
    },
  }, registry);

  resource(app, '/v1/acl/policy/name/*', {
    GET: {
      table: 'policies',
      handler: async (request, reply) => {
        await deps.reads.prepare(request, reply, 'policies');
        return sendJSON(request, reply, await policies.readByName(requestContext(request), (request.params as { '*': string })['*']));
      },
    },
  }, registry);

  resource(app, '/v1/acl/policies', {
    GET: {
      table: 'policies',
      handler: async (request, reply) => {
        await deps.reads.prepare(request, reply, 'policies');
        return sendJSON(request, reply, await policies.list(requestContext(request)));
      },
    },
  }, registry);
}
