import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { replicationStatusResponse } from '../../api/schemas.js';
import { relayToLeader } from '../forward.js';
import { sendJSON } from '../respond.js';
import { resource } from '../resource.js';
import type { AppDeps } from '../deps.js';

/** What the replication routes use. */
export type ReplicationRoutesDeps = Pick<AppDeps, 'cluster' | 'replicationStatus' | 'replicationHistory' | 'store'>;

export async function replicationRoutes(app: FastifyInstance, deps: ReplicationRoutesDeps): Promise<void> {
  resource(app, '/v1/acl/replication', {
    GET: {
      doc: {
        summary: "Replication status (no token needed); a follower answers with its leader's",
        permission: 'none',
        response: replicationStatusResponse,
      },
      handler: async (request, reply) => {
        // The leader replicates for the whole datacenter: a follower relays its status (as
        // Consul forwards the RPC), and answers with its own only when no leader answers.
        const relayed = await relayToLeader(request, reply, deps.cluster);
        if (relayed) return relayed;
        return sendJSON(request, reply, deps.replicationStatus());
      },
    },
  });

  resource(app, '/v1/internal/ui/replication-history', {
    GET: {
      doc: {
        summary:
          "Replication lag over the last hour, sampled by this server (the web UI's chart): on the primary each connected secondary, on " +
          'a secondary its own',
        permission: 'none',
        response: z.object({
          IntervalMs: z.number().int(),
          Samples: z.array(
            z.object({
              Time: z.number(),
              Datacenter: z.string(),
              LagEntries: z.number().int(),
              LastContactMs: z.number().int(),
              Connected: z.boolean(),
            }),
          ),
        }),
      },
      handler: async (request, reply) => sendJSON(request, reply, deps.replicationHistory?.() ?? { IntervalMs: 0, Samples: [] }),
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
