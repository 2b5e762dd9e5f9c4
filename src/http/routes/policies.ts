import type { FastifyInstance } from 'fastify';
import { decodeBody, parseJsonBody } from '../body.js';
import { requestContext } from '../pipeline.js';
import { sendJSON, sendWrite } from '../respond.js';
import { resource } from '../resource.js';
import { z } from 'zod';
import { DRY_RUN_DOC, deletedResponse, dryRunResponse, policyBody, policyResponse } from '../../api/schemas.js';
import { queryFlag } from '../request.js';
import type { AppDeps } from '../deps.js';

/** What the policy routes use. */
export type PolicyRoutesDeps = Pick<AppDeps, 'policies' | 'reads' | 'dryRun'>;

export async function policyRoutes(app: FastifyInstance, deps: PolicyRoutesDeps): Promise<void> {
  const { policies } = deps;

  resource(app, '/v1/acl/policy', {
    PUT: {
      doc: { summary: 'Create a policy', permission: 'acl:write', body: policyBody, response: policyResponse },
      forward: 'always',
      handler: async (request, reply) => {
        const input = decodeBody(policyBody, parseJsonBody(request.body));
        return sendWrite(request, reply, await policies.create(requestContext(request), input));
      },
    },
  });

  resource(app, '/v1/acl/policy/:id', {
    GET: {
      doc: { summary: 'Read a policy', permission: 'acl:read', response: policyResponse },
      table: 'policies',
      handler: async (request, reply) => {
        return deps.reads.serve(request, reply, 'policies', 'read', () => policies.read(requestContext(request), request.params.id));
      },
    },
    PUT: {
      doc: {
        summary: 'Update a policy; with ?dry-run nothing is written and the answer is what it would flip',
        permission: 'acl:write',
        body: policyBody,
        response: z.union([policyResponse, dryRunResponse]),
        query: { 'dry-run': DRY_RUN_DOC },
      },
      forward: 'always',
      handler: async (request, reply) => {
        const input = decodeBody(policyBody, parseJsonBody(request.body));
        if (queryFlag(request, 'dry-run'))
          return sendJSON(request, reply, await policies.dryRun(requestContext(request), request.params.id, input, deps.dryRun));
        return sendWrite(request, reply, await policies.update(requestContext(request), request.params.id, input));
      },
    },
    DELETE: {
      doc: { summary: 'Delete a policy', permission: 'acl:write', response: deletedResponse },
      forward: 'always',
      handler: async (request, reply) => {
        return sendWrite(request, reply, await policies.delete(requestContext(request), request.params.id));
      },
    },
  });

  resource(app, '/v1/acl/policy/name/*', {
    GET: {
      doc: { summary: 'Read a policy by name', permission: 'acl:read', response: policyResponse },
      table: 'policies',
      handler: async (request, reply) => {
        return deps.reads.serve(request, reply, 'policies', 'read', () =>
          policies.readByName(requestContext(request), request.params['*']),
        );
      },
    },
  });

  resource(app, '/v1/acl/policies', {
    GET: {
      doc: { summary: 'List policies (without their rules)', permission: 'acl:read', response: z.array(policyResponse) },
      table: 'policies',
      handler: async (request, reply) => {
        return deps.reads.serve(request, reply, 'policies', 'list', () => policies.list(requestContext(request)));
      },
    },
  });
}
