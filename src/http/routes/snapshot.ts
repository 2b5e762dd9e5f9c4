import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { snapshotRestoreResponse } from '../../api/schemas.js';
import { requestContext } from '../request.js';
import { sendJSON } from '../respond.js';
import { type RouteInfo, resource } from '../routes.js';
import type { AppDeps } from '../app.js';

/** The largest snapshot a restore accepts. */
export const SNAPSHOT_BODY_LIMIT = 2 * 1024 * 1024 * 1024 - 1;


export function snapshotRoutes(app: FastifyInstance, deps: AppDeps, registry: RouteInfo[]): void {
  const { snapshots } = deps;
  // Its own context: the body of a restore is the raw file, whatever the Content-Type
  // (curl --data-binary sends a form type), and may be far larger than 1 MiB.
  void app.register(async (child) => {
    child.removeAllContentTypeParsers();
    child.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: SNAPSHOT_BODY_LIMIT }, (_request, body, done) => done(null, body));
    resource(child, '/v1/snapshot', {
      GET: {
        doc: {
          summary: "A snapshot of this datacenter's state (every global object and its Local tokens)",
          permission: 'acl:write + operator:write',
          response: z.string(),
          responseType: 'application/octet-stream',
        },
        handler: async (request, reply) => {
          const { stream, index } = await snapshots.save(requestContext(request));
          void reply.header('X-Service-Index', index).header('X-Consul-Index', index).header('Content-Disposition', 'attachment; filename="watchword.snap"');
          return reply.type('application/octet-stream').send(stream);
        },
      },
      PUT: {
        doc: {
          summary: 'Restore a snapshot: on the primary every global object (and its own Local tokens), on a secondary its Local tokens',
          permission: 'acl:write + operator:write',
          body: z.string().describe('The snapshot file, as saved'),
          response: snapshotRestoreResponse,
        },
        handler: async (request, reply) => {
          const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
          const result = await snapshots.restore(requestContext(request), body);
          void reply.header('X-Service-Index', result.Index).header('X-Consul-Index', result.Index);
          return sendJSON(request, reply, result);
        },
      },
    }, registry);
  });
}
