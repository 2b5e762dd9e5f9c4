import type { FastifyInstance } from 'fastify';
import { decodeBody, parseJsonBody } from '../body.js';
import { requestContext } from '../pipeline.js';
import { sendWrite } from '../respond.js';
import { resource } from '../resource.js';
import { Written } from '../direct.js';
import { writesHere } from '../forward.js';
import { z } from 'zod';
import { cloneBody, rotateBody, deletedResponse, expandedTokenResponse, tokenBody, tokenResponse } from '../../api/schemas.js';
import { tokenListFilterOf, tokenListQueryDocs, tokenListQueryNames } from '../../api/token-list-filter.js';
import { PAGE_QUERY_DOCS, PAGE_QUERY_NAMES, pageOf } from '../../service/paging.js';
import type { AppDeps } from '../deps.js';

/** What the token routes use. */
export type TokenRoutesDeps = Pick<AppDeps, 'tokens' | 'agent' | 'reads' | 'cluster'>;

export async function tokenRoutes(app: FastifyInstance, deps: TokenRoutesDeps): Promise<void> {
  tokenWriteRoutes(app, deps);
  tokenListRoute(app, deps);
}

/** Token create, self, read, update, delete and clone. */
function tokenWriteRoutes(app: FastifyInstance, deps: TokenRoutesDeps): void {
  const { tokens, cluster } = deps;
  const here = () => writesHere(cluster);
  resource(app, '/v1/acl/token', {
    PUT: {
      doc: { summary: 'Create a token', permission: 'acl:write', body: tokenBody, response: tokenResponse },
      // A Local token is made here; a global one at the primary. Decided on the decoded body.
      forward: { global: (request) => !decodeBody(tokenBody, parseJsonBody(request.body)).Local },
      logic: {
        when: here,
        run: async ({ ctx, body }) => {
          const { value, index } = await tokens.create(ctx, decodeBody(tokenBody, parseJsonBody(body)));
          return new Written(value, index);
        },
      },
    },
  });

  resource(app, '/v1/acl/token/self', {
    GET: {
      doc: { summary: 'Read the token whose secret the request carries', permission: 'none', response: tokenResponse },
      table: 'tokens',
      logic: { read: { gate: deps.reads, access: 'self' }, run: ({ ctx }) => tokens.readSelf(ctx) },
    },
  });

  resource(app, '/v1/acl/token/:AccessorID', {
    GET: {
      doc: {
        summary: 'Read a token',
        permission: 'acl:read',
        response: z.union([tokenResponse, expandedTokenResponse]),
        query: { expanded: 'When present, add the policies and roles behind the token' },
      },
      table: 'tokens',
      logic: {
        query: ['expanded'],
        read: { gate: deps.reads, access: 'read' },
        run: ({ ctx, params: { AccessorID }, query }) =>
          query.has('expanded') ? tokens.readExpanded(ctx, AccessorID, deps.agent) : tokens.read(ctx, AccessorID),
      },
    },
    PUT: {
      doc: {
        summary: 'Update a token (full replacement of its mutable fields)',
        permission: 'acl:write',
        body: tokenBody,
        response: tokenResponse,
      },
      forward: 'token-by-id',
      handler: async (request, reply) => {
        const { AccessorID } = request.params;
        const input = decodeBody(tokenBody, parseJsonBody(request.body));
        return sendWrite(request, reply, await tokens.update(requestContext(request), AccessorID, input));
      },
    },
    DELETE: {
      doc: { summary: 'Delete a token', permission: 'acl:write', response: deletedResponse },
      forward: 'token-by-id',
      logic: {
        when: here,
        run: async ({ ctx, params: { AccessorID } }) => {
          const { value, index } = await tokens.delete(ctx, AccessorID);
          return new Written(value, index);
        },
      },
    },
  });

  tokenRotateRoute(app, tokens);

  resource(app, '/v1/acl/token/:AccessorID/clone', {
    PUT: {
      doc: { summary: 'Clone a token', permission: 'acl:write', body: cloneBody, bodyOptional: true, response: tokenResponse },
      forward: 'token-by-id',
      handler: async (request, reply) => {
        const { AccessorID } = request.params;
        const input = decodeBody(cloneBody, parseJsonBody(request.body));
        return sendWrite(request, reply, await tokens.clone(requestContext(request), AccessorID, input));
      },
    },
  });
}

/** The token list and its filters. */
function tokenListRoute(app: FastifyInstance, deps: TokenRoutesDeps): void {
  const { tokens } = deps;
  resource(app, '/v1/acl/tokens', {
    GET: {
      doc: {
        summary: 'List tokens',
        permission: 'acl:read',
        response: z.array(tokenResponse),
        query: { ...tokenListQueryDocs, ...PAGE_QUERY_DOCS },
      },
      table: 'tokens',
      logic: {
        query: [...tokenListQueryNames, ...PAGE_QUERY_NAMES],
        read: { gate: deps.reads, access: 'list' },
        run: ({ ctx, query }) =>
          tokens.list(
            ctx,
            tokenListFilterOf((name) => query.get(name)),
            pageOf('tokens', query.get('per_page'), query.get('cursor')),
          ),
      },
    },
  });
}

/** PUT /v1/acl/token/:AccessorID/rotate (docs/operator-insight.md, "Rotating a secret"). */
function tokenRotateRoute(app: FastifyInstance, tokens: TokenRoutesDeps['tokens']): void {
  resource(app, '/v1/acl/token/:AccessorID/rotate', {
    PUT: {
      doc: {
        summary:
          'Give the token a new SecretID (answered); the one it replaces keeps authenticating for Overlap ("10m"; default 0, at most 24h), ' +
          'then nowhere',
        permission: 'acl:write',
        body: rotateBody,
        bodyOptional: true,
        response: tokenResponse,
      },
      forward: 'token-by-id',
      handler: async (request, reply) => {
        const { AccessorID } = request.params;
        const input = decodeBody(rotateBody, parseJsonBody(request.body));
        return sendWrite(request, reply, await tokens.rotate(requestContext(request), AccessorID, input));
      },
    },
  });
}
