import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { DRY_RUN_DOC, deletedResponse, dryRunResponse } from '../../api/schemas.js';
import type { RequestContext, WriteResult } from '../../service/context.js';
import type { DryRunAnswer, DryRunService } from '../../service/dry-run.js';
import { decodeBody, parseJsonBody } from '../body.js';
import type { AppDeps } from '../deps.js';
import { requestContext } from '../pipeline.js';
import { queryFlag, queryParam } from '../request.js';
import { PAGE_QUERY_DOCS, pageOf, pageOfList } from '../../service/paging.js';
import { sendJSON, sendWrite } from '../respond.js';
import { resource } from '../resource.js';

/** What a policy's or a role's service answers to, as their routes call it. */
export interface AclObjectService<I, V> {
  create(ctx: RequestContext, input: I): Promise<WriteResult<V>>;
  read(ctx: RequestContext, id: string): Promise<V>;
  readByName(ctx: RequestContext, name: string): Promise<V>;
  update(ctx: RequestContext, id: string, input: I): Promise<WriteResult<V>>;
  dryRun(ctx: RequestContext, id: string, input: I, dryRun: DryRunService): Promise<DryRunAnswer>;
  delete(ctx: RequestContext, id: string): Promise<WriteResult<boolean>>;
}

/**
 * The routes of one kind of ACL object kept by ID and by name (policies, roles): create, read,
 * update (a full replacement, or with ?dry-run what it would flip), delete, read by name, list.
 * One shape: the two kinds differ only in their names, body, answer and list filter.
 */
export interface AclObjectRoutes<I, V> {
  /** The object's name in paths and summaries: `policy`, `role`. */
  one: 'policy' | 'role';
  /** Its table, and its list's path: `policies`, `roles`. */
  many: 'policies' | 'roles';
  body: z.ZodType<I>;
  response: z.ZodType;
  service: AclObjectService<I, V>;
  /** Its name in a by-name read's path: a policy's may hold one `/`, so it takes the rest of the path. */
  nameFrom: 'rest' | 'segment';
  list: {
    /** The list's summary, where it says more than `List policies`. */
    summary?: string;
    /** Query parameters that filter the list, and what each selects. */
    query?: Record<string, string>;
    run(ctx: RequestContext, request: FastifyRequest): Promise<V[]>;
  };
}

/** A policy's or role's place in its list's order: namespace, then ID. */
const listKey = (v: unknown): string => {
  const o = v as { Namespace?: string; ID: string };
  return `${o.Namespace ?? ''}\u0000${o.ID}`;
};

export function aclObjectRoutes<I, V>(app: FastifyInstance, deps: Pick<AppDeps, 'reads' | 'dryRun'>, o: AclObjectRoutes<I, V>): void {
  const { one, many, body, response, service } = o;
  const byID = `/v1/acl/${one}/:id` as const;

  resource(app, `/v1/acl/${one}`, {
    PUT: {
      doc: { summary: `Create a ${one}`, permission: 'acl:write', body, response },
      forward: 'always',
      handler: async (request, reply) =>
        sendWrite(request, reply, await service.create(requestContext(request), decodeBody(body, parseJsonBody(request.body)))),
    },
  });

  resource(app, byID, {
    GET: {
      doc: { summary: `Read a ${one}`, permission: 'acl:read', response },
      table: many,
      handler: async (request, reply) =>
        deps.reads.serve(request, reply, many, 'read', () => service.read(requestContext(request), request.params.id)),
    },
    PUT: {
      doc: {
        summary: `Update a ${one} (full replacement); with ?dry-run nothing is written and the answer is what it would flip`,
        permission: 'acl:write',
        body,
        response: z.union([response, dryRunResponse]),
        query: { 'dry-run': DRY_RUN_DOC },
      },
      forward: 'always',
      handler: async (request, reply) => {
        const input = decodeBody(body, parseJsonBody(request.body));
        const ctx = requestContext(request);
        if (queryFlag(request, 'dry-run'))
          return sendJSON(request, reply, await service.dryRun(ctx, request.params.id, input, deps.dryRun));
        return sendWrite(request, reply, await service.update(ctx, request.params.id, input));
      },
    },
    DELETE: {
      doc: { summary: `Delete a ${one}`, permission: 'acl:write', response: deletedResponse },
      forward: 'always',
      handler: async (request, reply) => sendWrite(request, reply, await service.delete(requestContext(request), request.params.id)),
    },
  });

  if (o.nameFrom === 'rest')
    resource(app, `/v1/acl/${one}/name/*`, {
      GET: {
        doc: { summary: `Read a ${one} by name`, permission: 'acl:read', response },
        table: many,
        handler: async (request, reply) =>
          deps.reads.serve(request, reply, many, 'read', () => service.readByName(requestContext(request), request.params['*'])),
      },
    });
  else
    resource(app, `/v1/acl/${one}/name/:name`, {
      GET: {
        doc: { summary: `Read a ${one} by name`, permission: 'acl:read', response },
        table: many,
        handler: async (request, reply) =>
          deps.reads.serve(request, reply, many, 'read', () => service.readByName(requestContext(request), request.params.name)),
      },
    });

  resource(app, `/v1/acl/${many}`, {
    GET: {
      doc: {
        summary: o.list.summary ?? `List ${many}`,
        permission: 'acl:read',
        response: z.array(response),
        query: { ...o.list.query, ...PAGE_QUERY_DOCS },
      },
      table: many,
      handler: async (request, reply) => {
        // Checked before the read (a bad value is 400 whatever the list holds).
        const page = pageOf(many, queryParam(request, 'per_page'), queryParam(request, 'cursor'));
        return deps.reads.serve(request, reply, many, 'list', async () => {
          const items = await o.list.run(requestContext(request), request);
          // The few policies and roles of a place come whole, ordered by namespace then ID: a page is their slice.
          return page === undefined ? items : pageOfList(many, items, listKey, page);
        });
      },
    },
  });
}
