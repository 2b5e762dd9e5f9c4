import type { FastifyInstance } from 'fastify';
import { type Judged, answersJSON, withSecondsLeft } from '../../service/decisions.js';
import { JSONText } from '../../service/views.js';
import type { Reason } from '../../domain/rules/explain-types.js';
import { parseJsonBody } from '../body.js';
import { queryParam } from '../request.js';
import { requestContext } from '../pipeline.js';
import { sendJSON } from '../respond.js';
import { type RouteSpec, resource } from '../resource.js';
import { authorizeBody, authorizeResponse, tokenAuthorizerResponse, whoCanResponse } from '../../api/schemas.js';
import { invalid } from '../../domain/errors.js';
import { blockingParams } from '../blocking.js';
import type { AppDeps } from '../deps.js';

/** POST (and PUT) /v1/internal/acl/authorize: may the request's token do each of these? (docs/enforcing-client.md, "Enforcing policies in your service") */
/** What the decision routes use. */
export type DecisionRoutesDeps = Pick<AppDeps, 'decisions' | 'whoCan' | 'metrics' | 'reads'>;

export async function decisionRoutes(app: FastifyInstance, deps: DecisionRoutesDeps): Promise<void> {
  const allowed = deps.metrics.authorizeChecks.labels({ allowed: 'true' });
  const denied = deps.metrics.authorizeChecks.labels({ allowed: 'false' });
  const count = (allows: readonly boolean[]) => {
    let yes = 0;
    for (const a of allows) if (a) yes++;
    if (yes > 0) allowed.inc(yes);
    if (allows.length > yes) denied.inc(allows.length - yes);
  };
  const spec: RouteSpec = {
    doc: {
      summary: "Judge 1 to 64 checks {Resource, Segment, Access} for the request's token; the same array back with Allow",
      permission: 'none',
      query: { explain: 'When present, each answer adds Reason: the deciding source and rule as written, and the rule that lost' },
      body: authorizeBody,
      response: authorizeResponse,
    },
    // The hottest path a service calls.
    logic: {
      query: ['explain'],
      run: ({ ctx, body, query }) => {
        const answer = (r: Judged & { reasons?: Reason[] }) => {
          count(r.allows);
          return answersJSON(r.checks, r.allows, r.reasons);
        };
        if (query.has('explain')) return deps.decisions.explain(ctx, parseJsonBody(body)).then(answer);
        const result = deps.decisions.authorize(ctx, parseJsonBody(body), typeof body === 'string' ? body : undefined);
        return result instanceof Promise ? result.then(answer) : answer(result);
      },
    },
  };
  resource(app, '/v1/internal/acl/authorize', { POST: spec, PUT: spec });

  resource(app, '/v1/internal/acl/authorizer', {
    GET: {
      doc: {
        summary:
          "The request's own token as an enforcing client compiles it: place, expiry, default policy and the rules of every policy that " +
          'applies here. Blocks with ?hash= until that changes',
        permission: 'none',
        response: tokenAuthorizerResponse,
        query: {
          hash:
            'Blocking: answer once the content hash differs from this one (X-Service-ContentHash of the last answer), or the ' +
            'wait runs out',
          wait: 'Longest wait with ?hash= (default 5m, at most 10m)',
        },
      },
      handler: async (request, reply) => {
        const ctx = requestContext(request);
        const { wait } = blockingParams(request);
        const hash = queryParam(request, 'hash');
        if (hash !== undefined && hash !== '' && !/^[0-9a-f]{1,64}$/.test(hash))
          throw invalid('Invalid hash: expected the X-Service-ContentHash of an earlier answer');
        let answer = await deps.decisions.tokenAuthorizer(ctx);
        if (hash && answer.hash === hash) {
          await deps.reads.hold(request, reply, wait, (signal) => deps.decisions.waitForChange(ctx, hash, signal));
          answer = await deps.decisions.tokenAuthorizer(ctx);
        }
        void reply.header('X-Service-ContentHash', answer.hash).header('X-Consul-ContentHash', answer.hash);
        return sendJSON(request, reply, withSecondsLeft(answer.view, Date.now()));
      },
    },
  });
  whoCanRoute(app, deps);
}

/** GET /v1/acl/who-can (docs/operator-insight.md, "Who can"). */
function whoCanRoute(app: FastifyInstance, deps: DecisionRoutesDeps): void {
  resource(app, '/v1/acl/who-can', {
    GET: {
      doc: {
        summary:
          'The tokens (paged, in AccessorID order) and roles of a place that are granted a check, each with the Reason; from the indexes by ' +
          'policy, role, identity and template, never by judging every token',
        permission: 'acl:read',
        response: whoCanResponse,
        query: {
          resource: 'The resource, as in a decision: service, key, node, acl, operator, …',
          segment: 'The name the check is about (segmented resources)',
          access: 'read, write, list (key), write-prefix (key)',
          limit: `At most this many tokens (default 100, at most 1000)`,
          cursor: 'The NextCursor of the previous page',
        },
      },
      table: 'tokens',
      logic: {
        query: ['resource', 'segment', 'access', 'limit', 'cursor'],
        read: { gate: deps.reads, access: 'list' },
        run: async ({ ctx, query }) =>
          new JSONText(
            JSON.stringify(
              await deps.whoCan.whoCan(ctx, {
                resource: query.get('resource'),
                segment: query.get('segment'),
                access: query.get('access'),
                limit: query.get('limit'),
                cursor: query.get('cursor'),
              }),
            ),
          ),
      },
    },
  });
}
