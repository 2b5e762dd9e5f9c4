import type { FastifyInstance } from 'fastify';
import { sendJSON } from '../respond.js';
import { resource } from '../routes.js';
import { queryParam, requestSecret } from '../request.js';
import { WatchwordError } from '../../domain/errors.js';
import { z } from 'zod';
import { agentSelfResponse, operatorServersResponse } from '../../api/schemas.js';
import type { AppDeps } from '../deps.js';

/** What the agent routes use. */
export type AgentRoutesDeps = Pick<AppDeps, 'agent' | 'metrics' | 'resolver'>;

export async function agentRoutes(app: FastifyInstance, deps: AgentRoutesDeps): Promise<void> {
  resource(app, '/v1/status/leader', {
    GET: {
      doc: { summary: "Address of this datacenter's leader (\"\" while none is known)", permission: 'none', response: z.string() },
      handler: async (request, reply) => sendJSON(request, reply, deps.agent.leaderAddress()),
    },
  });

  resource(app, '/v1/status/peers', {
    GET: {
      doc: { summary: "Addresses of this datacenter's servers", permission: 'none', response: z.array(z.string()) },
      handler: async (request, reply) => sendJSON(request, reply, deps.agent.peers()),
    },
  });

  resource(app, '/v1/operator/servers', {
    GET: {
      doc: { summary: "This datacenter's servers: role, term, applied index, lag, synchronous set", permission: 'operator:read', response: operatorServersResponse },
      handler: async (request, reply) => {
        const identity = await deps.resolver.resolve(requestSecret(request), request.ip);
        if (identity.authorizer.operatorAccess() === 'none') {
          throw new WatchwordError('PERMISSION_DENIED', "Permission denied: token lacks permission 'operator:read'");
        }
        return sendJSON(request, reply, deps.agent.servers());
      },
    },
  });

  resource(app, '/v1/agent/self', {
    GET: {
      doc: { summary: 'Configuration (without secrets), version and role of this daemon', permission: 'none', response: agentSelfResponse },
      handler: async (request, reply) => {
        // Where the coordinator is, is for operators: anonymous callers do not learn where to plant a leader key.
        const identity = await deps.resolver.resolve(requestSecret(request), request.ip);
        return sendJSON(request, reply, deps.agent.self(identity.authorizer.operatorAccess() !== 'none'));
      },
    },
  });

  resource(app, '/v1/catalog/datacenters', {
    GET: {
      doc: { summary: 'Known datacenters, primary first', permission: 'none', response: z.array(z.string()) },
      handler: async (request, reply) => sendJSON(request, reply, deps.agent.datacenters()),
    },
  });

  resource(app, '/v1/agent/metrics', {
    GET: {
      doc: {
        summary: 'Metrics: Prometheus text with ?format=prometheus, else JSON',
        permission: 'none',
        response: z.string(),
        responseType: 'text/plain; version=0.0.4',
        query: { format: '"prometheus" for the Prometheus text format' },
      },
      handler: async (request, reply) => {
        const metrics = deps.metrics.registry;
        if (queryParam(request, 'format') === 'prometheus') {
          return reply.type(metrics.contentType).send(await metrics.metrics());
        }
        return sendJSON(request, reply, await metrics.getMetricsAsJSON());
      },
    },
  });
}
