import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { replicationStatusResponse } from '../../api/schemas.js';
import { sendJSON } from '../respond.js';
import { type RouteInfo, resource } from '../routes.js';
import type { AppDeps } from '../app.js';

export function replicationRoutes(app: FastifyInstance, deps: AppDeps, registry: RouteInfo[]): void {
  resource(app, '/v1/acl/replication', {
    GET: {
      doc: { summary: 'Replication status (no token needed)', permission: 'none', response: replicationStatusResponse },
      handler: async (request, reply) => sendJSON(request, reply, deps.replicationStatus()),
    },
  }, registry);

  resource(app, '/v1/internal/index', {
    GET: {
      doc: {
        summary: "This datacenter's durable index and change-log identity (used by secondaries to catch up)",
        permission: 'none',
        response: z.object({ Index: z.number().int(), LogID: z.string() }),
      },
      handler: async (request, reply) => sendJSON(request, reply, { Index: deps.store.currentIndex(), LogID: deps.store.logID }),
    },
  }, registry);
}
