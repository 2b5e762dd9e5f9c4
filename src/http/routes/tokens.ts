import type { FastifyInstance } from 'fastify';
import { decodeBody, parseJsonBody } from '../body.js';
import { queryFlag, queryParam, requestContext } from '../request.js';
import { sendJSON, sendWrite } from '../respond.js';
import { type RouteInfo, resource } from '../routes.js';
import { cloneBody, tokenBody } from '../../api/schemas.js';
import type { AppDeps } from '../app.js';

type IdParams = { AccessorID: string };

export function tokenRoutes(app: FastifyInstance, deps: AppDeps, registry: RouteInfo[]): void {
  const { tokens } = deps;

  resource(app, '/v1/acl/token', {
    PUT: {
      handler: async (request, reply) => {
        const input = decodeBody(tokenBody, parseJsonBody(request.body));
        return sendWrite(request, reply, await tokens.create(requestContext(request), input));
      },
    },
  }, registry);

  resource(app, '/v1/acl/token/self', {
    GET: {
      table: 'tokens',
      handler: async (request, reply) => {
        await deps.reads.prepare(request, reply, 'tokens');
        return sendJSON(request, reply, await tokens.readSelf(requestContext(request)));
      },
    },
  }, registry);

  resource(app, '/v1/acl/token/:AccessorID', {
    GET: {
      table: 'tokens',
      handler: async (request, reply) => {
        const { AccessorID } = request.params as IdParams;
        const expanded = queryFlag(request, 'expanded');
        await deps.reads.prepare(request, reply, 'tokens');
        const ctx = requestContext(request);
        const result = expanded
          ? await tokens.readExpanded(ctx, AccessorID, deps.agent)
          : (await tokens.read(ctx, AccessorID)).view;
        return sendJSON(request, reply, result);
      },
    },
    PUT: {
      handler: async (request, reply) => {
        const { AccessorID } = request.params as IdParams;
        const input = decodeBody(tokenBody, parseJsonBody(request.body));
        return sendWrite(request, reply, await tokens.update(requestContext(request), AccessorID, input));
      },
    },
    DELETE: {
      handler: async (request, reply) => {
        const { AccessorID } = request.params as IdParams;
        return sendWrite(request, reply, await tokens.delete(requestContext(request), AccessorID));
      },
    },
  }, registry);

  resource(app, '/v1/acl/token/:AccessorID/clone', {
    PUT: {
      handler: async (request, reply) => {
        const { AccessorID } = request.params as IdParams;
        const input = decodeBody(cloneBody, parseJsonBody(request.body));
        return sendWrite(request, reply, await tokens.clone(requestContext(request), AccessorID, input));
      },
    },
  }, registry);

  resource(app, '/v1/acl/tokens', {
    GET: {
      table: 'tokens',
      handler: async (request, reply) => {
        const q = {
          policy: queryParam(request, 'policy'),
          role: queryParam(request, 'role'),
          servicename: queryParam(request, 'servicename'),
          authmethod: queryParam(request, 'authmethod'),
          authmethodNamespace: queryParam(request, 'authmethod-ns'),
        };
        await deps.reads.prepare(request, reply, 'tokens');
        return sendJSON(request, reply, await tokens.list(requestContext(request), q));
      },
    },
  }, registry);
}
