import type { FastifyInstance } from 'fastify';
import { decodeBody, parseJsonBody } from '../body.js';
import { sendWrite } from '../respond.js';
import { requestContext } from '../pipeline.js';
import { resource } from '../resource.js';
import { bootstrapBody, bootstrapResponse } from '../../api/schemas.js';
import type { AppDeps } from '../deps.js';

/** What the bootstrap routes use. */
export type BootstrapRoutesDeps = Pick<AppDeps, 'bootstrap'>;

export async function bootstrapRoutes(app: FastifyInstance, deps: BootstrapRoutesDeps): Promise<void> {
  resource(app, '/v1/acl/bootstrap', {
    PUT: {
      doc: {
        summary: 'Bootstrap ACLs: the first management token (once)',
        permission: 'none',
        body: bootstrapBody,
        bodyOptional: true,
        response: bootstrapResponse,
      },
      handler: async (request, reply) => {
        const input = decodeBody(bootstrapBody, parseJsonBody(request.body as string));
        return sendWrite(request, reply, await deps.bootstrap.bootstrap(requestContext(request), input.BootstrapSecret));
      },
    },
  });
}
