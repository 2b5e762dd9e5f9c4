import type { FastifyInstance } from 'fastify';
import { decodeBody, parseJsonBody } from '../body.js';
import { requestContext } from '../pipeline.js';
import { sendJSON } from '../respond.js';
import { resource } from '../resource.js';
import { syntheticPolicyResponse, templatedPoliciesResponse, templatedPolicyResponse, templateVariablesBody } from '../../api/schemas.js';
import type { AppDeps } from '../deps.js';

const nameParam = (params: unknown): string => (params as { '*': string })['*'];

/** What the templatedPolicy routes use. */
export type TemplatedPolicyRoutesDeps = Pick<AppDeps, 'templatedPolicies'>;

export async function templatedPolicyRoutes(app: FastifyInstance, deps: TemplatedPolicyRoutesDeps): Promise<void> {
  const { templatedPolicies } = deps;

  resource(app, '/v1/acl/templated-policies', {
    GET: {
      doc: { summary: 'List the built-in templated policies, keyed by name', permission: 'acl:read', response: templatedPoliciesResponse },
      handler: async (request, reply) => sendJSON(request, reply, await templatedPolicies.list(requestContext(request))),
    },
  });

  resource(app, '/v1/acl/templated-policy/name/*', {
    GET: {
      doc: { summary: 'Read a templated policy by name', permission: 'acl:read', response: templatedPolicyResponse },
      handler: async (request, reply) =>
        sendJSON(request, reply, await templatedPolicies.read(requestContext(request), nameParam(request.params))),
    },
  });

  resource(app, '/v1/acl/templated-policy/preview/*', {
    POST: {
      doc: {
        summary: 'Render a templated policy into a synthetic policy',
        permission: 'acl:read',
        body: templateVariablesBody,
        bodyOptional: true,
        response: syntheticPolicyResponse,
      },
      handler: async (request, reply) => {
        const vars = decodeBody(templateVariablesBody, parseJsonBody(request.body));
        return sendJSON(request, reply, await templatedPolicies.preview(requestContext(request), nameParam(request.params), vars));
      },
    },
  });
}
