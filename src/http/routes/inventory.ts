import type { FastifyInstance } from 'fastify';
import { inventoryResponse } from '../../api/status-schemas.js';
import type { AppDeps } from '../deps.js';
import { requestContext } from '../pipeline.js';
import { sendJSON } from '../respond.js';
import { resource } from '../resource.js';

/** What the inventory route uses. */
export type InventoryRoutesDeps = Pick<AppDeps, 'inventory'>;

/** GET /v1/acl/inventory (docs/http-api.md, "Inventory"): the counts of this datacenter's tokens. */
export async function inventoryRoutes(app: FastifyInstance, deps: InventoryRoutesDeps): Promise<void> {
  resource(app, '/v1/acl/inventory', {
    GET: {
      doc: {
        summary:
          'Counts of the tokens held here: by auth method, role, policy, namespace, partition and locality; expiring within 1h and 24h; ' +
          'never used, unused for 30 days, holding acl:write; each quota’s use',
        permission: 'acl:read',
        response: inventoryResponse,
      },
      handler: async (request, reply) => sendJSON(request, reply, await deps.inventory.inventory(requestContext(request))),
    },
  });
}
