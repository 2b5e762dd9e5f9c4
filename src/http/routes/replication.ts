import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { replicationStatusResponse } from '../../api/schemas.js';
import { type FollowerHooks, SERVER_FORWARD_HEADER, forwardToLeader } from '../forward.js';
import { sendJSON } from '../respond.js';
import { resource } from '../routes.js';
import type { AppDeps } from '../deps.js';

/** What the replication routes use. */
export type ReplicationRoutesDeps = Pick<AppDeps, 'cluster' | 'replicationStatus' | 'store'>;

export async function replicationRoutes(app: FastifyInstance, deps: ReplicationRoutesDeps): Promise<void> {
  resource(app, '/v1/acl/replication', {
    GET: {
      doc: { summary: "Replication status (no token needed); a follower answers with its leader's", permission: 'none', response: replicationStatusResponse },
      handler: async (request, reply) => {
        // The leader replicates for the whole datacenter: a follower relays its status (as
        // Consul forwards the RPC), and answers with its own only when no leader answers.
        const cluster = deps.cluster;
        let follower: FollowerHooks | undefined;
        try {
          follower = cluster?.follower?.();
        } catch {
          follower = undefined;
        }
        if (cluster && follower && request.headers[SERVER_FORWARD_HEADER] === undefined) {
          try {
            return await forwardToLeader(request, reply, follower, cluster.datacenter);
          } catch {
            // No answer from the leader: this server's own view below.
          }
        }
        return sendJSON(request, reply, deps.replicationStatus());
      },
    },
  });

  resource(app, '/v1/internal/index', {
    GET: {
      doc: {
        summary: "This datacenter's durable index and change-log identity (used by secondaries to catch up)",
        permission: 'none',
        response: z.object({ Index: z.number().int(), LogID: z.string() }),
      },
      handler: async (request, reply) => sendJSON(request, reply, { Index: deps.store.currentIndex(), LogID: deps.store.logID }),
    },
  });
}
