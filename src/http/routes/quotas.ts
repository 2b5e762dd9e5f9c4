import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { deletedResponse, quotaBody, quotaResponse } from '../../api/schemas.js';
import type { AppDeps } from '../deps.js';
import { decodeBody, parseJsonBody } from '../body.js';
import { requestContext } from '../pipeline.js';
import { pathParam } from '../request.js';
import { sendWrite } from '../respond.js';
import { resource } from '../resource.js';

/** What the quota routes use. */
export type QuotaRoutesDeps = Pick<AppDeps, 'quotas' | 'reads' | 'store'>;

/** Quotas (docs/http-api.md, "Quotas"): a global one is written at the primary, a Local one where it is sent. */
export async function quotaRoutes(app: FastifyInstance, deps: QuotaRoutesDeps): Promise<void> {
  const { quotas } = deps;
  const body = (request: FastifyRequest) => decodeBody(quotaBody, parseJsonBody(request.body));
  /** A quota named in the path is global unless it is a Local one held here. */
  const globalByID = (request: FastifyRequest) => deps.store.reader.getQuota(pathParam(request, 'id') ?? '')?.Local !== true;

  resource(app, '/v1/acl/quota', {
    PUT: {
      doc: {
        summary: 'Create a quota: for one auth method, namespace or partition, MaxTokens, MaxTokenTTL, MinTokenTTL',
        permission: 'acl:write',
        body: quotaBody,
        response: quotaResponse,
      },
      forward: { global: (request) => body(request).Local !== true },
      handler: async (request, reply) => sendWrite(request, reply, await quotas.create(requestContext(request), body(request))),
    },
  });

  resource(app, '/v1/acl/quota/:id', {
    GET: {
      doc: { summary: 'Read a quota, with the live tokens it counts here (Used)', permission: 'acl:read', response: quotaResponse },
      table: 'quotas',
      handler: async (request, reply) =>
        deps.reads.serve(request, reply, 'quotas', 'read', () => quotas.read(requestContext(request), request.params.id)),
    },
    PUT: {
      doc: { summary: 'Update a quota (Local cannot change)', permission: 'acl:write', body: quotaBody, response: quotaResponse },
      forward: { global: globalByID },
      handler: async (request, reply) =>
        sendWrite(request, reply, await quotas.update(requestContext(request), request.params.id, body(request))),
    },
    DELETE: {
      doc: { summary: 'Delete a quota', permission: 'acl:write', response: deletedResponse },
      forward: { global: globalByID },
      handler: async (request, reply) => sendWrite(request, reply, await quotas.delete(requestContext(request), request.params.id)),
    },
  });

  resource(app, '/v1/acl/quotas', {
    GET: {
      doc: {
        summary: 'List quotas (global ones and this datacenter’s Local ones), by name',
        permission: 'acl:read',
        response: z.array(quotaResponse),
      },
      table: 'quotas',
      handler: async (request, reply) => deps.reads.serve(request, reply, 'quotas', 'list', () => quotas.list(requestContext(request))),
    },
  });
}
