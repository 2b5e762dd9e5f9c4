import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { parseJsonBody } from '../body.js';
import { requestContext } from '../request.js';
import { sendJSON } from '../respond.js';
import { type RouteInfo, type RouteSpec, resource } from '../routes.js';
import { authorizeBody, authorizeResponse } from '../../api/schemas.js';
import type { AppDeps } from '../app.js';

/** POST (and PUT) /v1/internal/acl/authorize: may the request's token do each of these? (SPEC §17) */
export function decisionRoutes(app: FastifyInstance, deps: AppDeps, registry: RouteInfo[]): void {
  const allowed = deps.metrics.authorizeChecks.labels({ allowed: 'true' });
  const denied = deps.metrics.authorizeChecks.labels({ allowed: 'false' });
  const spec: RouteSpec = {
    doc: {
      summary: "Judge 1 to 64 checks {Resource, Segment, Access} for the request's token; the same array back with Allow",
      permission: 'none',
      body: authorizeBody,
      response: authorizeResponse,
    },
    handler: async (request: FastifyRequest, reply: FastifyReply) => {
      const answers = await deps.decisions.authorize(requestContext(request), parseJsonBody(request.body));
      let yes = 0;
      for (const a of answers) if (a.Allow) yes++;
      if (yes > 0) allowed.inc(yes);
      if (answers.length > yes) denied.inc(answers.length - yes);
      return sendJSON(request, reply, answers);
    },
  };
  resource(app, '/v1/internal/acl/authorize', { POST: spec, PUT: spec }, registry);
}
