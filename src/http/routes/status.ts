import type { FastifyInstance } from 'fastify';
import { sendJSON } from '../respond.js';
import { type RouteInfo, resource } from '../routes.js';
import type { AppDeps } from '../app.js';

export function statusRoutes(app: FastifyInstance, deps: AppDeps, registry: RouteInfo[]): void {
  resource(app, '/v1/status/leader', {
    GET: { handler: async (request, reply) => sendJSON(request, reply, deps.agent.address()) },
  }, registry);
}
