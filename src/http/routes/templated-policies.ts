import type { FastifyInstance } from 'fastify';
import { decodeBody, parseJsonBody } from '../body.js';
import { requestContext } from '../request.js';
import { sendJSON } from '../respond.js';
import { type RouteInfo, resource } from '../routes.js';
import { templateVariablesBody } from '../../api/schemas.js';
import type { AppDeps } from '../app.js';

const nameParam = (params: unknown): string => (params as { '*': string })['*'];

export function templatedPolicyRoutes(app: FastifyInstance, deps: AppDeps, registry: RouteInfo[]): void {
  const { templatedPolicies } = deps;

  resource(app, '/v1/acl/templated-policies', {
    GET: { handler: async (request, reply) => sendJSON(request, reply, await templatedPolicies.list(requestContext(request))) },
  }, registry);

  resource(app, '/v1/acl/templated-policy/name/*', {
    GET: { handler: async (request, reply) => sendJSON(request, reply, await templatedPolicies.read(requestContext(request), nameParam(request.params))) },
  }, registry);

  resource(app, '/v1/acl/templated-policy/preview/*', {
    POST: {
      handler: async (request, reply) => {
        const vars = decodeBody(templateVariablesBody, parseJsonBody(request.body));
        return sendJSON(request, reply, await templatedPolicies.preview(requestContext(request), nameParam(request.params), vars));
      },
    },
  }, registry);
}
