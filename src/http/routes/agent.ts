import type { FastifyInstance, FastifyRequest } from 'fastify';
import { sendJSON } from '../respond.js';
import { resource } from '../resource.js';
import { queryParam, requestSecret } from '../request.js';
import { invalid } from '../../domain/errors.js';
import type { Identity } from '../../service/acl-resolver.js';
import { deniedWithReason, permissionDenied } from '../../service/permissions.js';
import { z } from 'zod';
import {
  agentHealthResponse,
  agentSelfResponse,
  auditPageResponse,
  operatorPrimaryResponse,
  operatorUpgradeResponse,
  operatorServersResponse,
  primaryPlacementResponse,
  promotionResponse,
  transferLeaderResponse,
} from '../../api/schemas.js';
import type { AppDeps } from '../deps.js';
import { relayToLeader } from '../forward.js';
import { AUDIT_OBJECT_KINDS, AUDIT_TYPES, type AuditType, isAuditKind, isAuditType } from '../../domain/audit-types.js';

/** What the agent routes use. */
export type AgentRoutesDeps = Pick<AppDeps, 'agent' | 'metrics' | 'resolver' | 'audit' | 'cluster'>;

/**
 * The operator endpoints' own check: the request's token must grant operator `access` (as Consul
 * asks), and with `aclWrite` acl:write too (a transfer of the primary role moves every ACL write).
 */
async function requireOperator(
  deps: AgentRoutesDeps,
  request: FastifyRequest,
  access: 'read' | 'write',
  aclWrite = false,
): Promise<Identity> {
  const identity = await deps.resolver.resolve(requestSecret(request), request.ip);
  const { authorizer } = identity;
  const granted = authorizer.operatorAccess();
  if (granted === 'none' || (access === 'write' && granted !== 'write'))
    throw deniedWithReason(identity, `Permission denied: token lacks permission 'operator:${access}'`, 'operator', '', access);
  if (aclWrite && !authorizer.canWrite('default', 'default'))
    throw permissionDenied(identity, 'write', { Namespace: 'default', Partition: 'default' });
  return identity;
}

/** Whether the request's token may learn where a datacenter's servers are: a replication token (acl:write), or operator:read. */
async function mayKnowServers(deps: AgentRoutesDeps, request: FastifyRequest): Promise<boolean> {
  const secret = requestSecret(request);
  if (secret === undefined) return false;
  try {
    const { authorizer } = await deps.resolver.resolve(secret, request.ip);
    return authorizer.operatorAccess() !== 'none' || authorizer.canWrite('default', 'default');
  } catch {
    return false;
  }
}

/** RFC 3339 or milliseconds since the epoch, for `since` and `until`. */
function timeParam(name: string, value: string | undefined): number | undefined {
  if (value === undefined || value === '') return undefined;
  const ms = /^\d+$/.test(value) ? Number(value) : Date.parse(value);
  if (Number.isNaN(ms))
    throw invalid(`Invalid ${name}: expected an RFC 3339 time such as "2030-01-02T15:04:05Z" or milliseconds since the epoch`);
  return ms;
}

function countParam(name: string, value: string | undefined, fallback: number, max: number): number {
  if (value === undefined || value === '') return fallback;
  if (!/^\d{1,9}$/.test(value)) throw invalid(`Invalid ${name}: expected a whole number`);
  return Math.min(Number(value), max);
}

/** `agent:read` on this node (as Consul asks for /v1/agent/self and /v1/agent/metrics); the identity, for what else it may see. */
function agentReader(deps: AgentRoutesDeps) {
  return async (request: FastifyRequest) => {
    const identity = await deps.resolver.resolve(requestSecret(request), request.ip);
    const a = identity.authorizer;
    if (!a.allows('agent', deps.agent.nodeName, 'read', a.tokenPartition, a.tokenNamespace)) {
      const who = identity.anonymous ? 'the anonymous token (no token was sent)' : `token with AccessorID '${identity.token.AccessorID}'`;
      const message = `Permission denied: ${who} lacks permission 'agent:read' on ${JSON.stringify(deps.agent.nodeName)}`;
      throw deniedWithReason(identity, message, 'agent', deps.agent.nodeName, 'read');
    }
    return identity;
  };
}

export async function agentRoutes(app: FastifyInstance, deps: AgentRoutesDeps): Promise<void> {
  statusRoutes(app, deps);
  primaryRoutes(app, deps);
  upgradeRoutes(app, deps);
  healthRoute(app, deps);
  auditRoute(app, deps);
  selfAndMetricsRoutes(app, deps);
}

/** Where this datacenter's servers are, and what each knows of the others. */
function statusRoutes(app: FastifyInstance, deps: AgentRoutesDeps): void {
  resource(app, '/v1/status/leader', {
    GET: {
      doc: { summary: 'Address of this datacenter\'s leader ("" while none is known)', permission: 'none', response: z.string() },
      handler: async (request, reply) => sendJSON(request, reply, deps.agent.leaderAddress()),
    },
  });

  resource(app, '/v1/status/peers', {
    GET: {
      doc: { summary: "Addresses of this datacenter's servers", permission: 'none', response: z.array(z.string()) },
      handler: async (request, reply) => sendJSON(request, reply, deps.agent.peers()),
    },
  });

  resource(app, '/v1/operator/servers', {
    GET: {
      doc: {
        summary: "This datacenter's servers: role, term, applied index, lag, synchronous set",
        permission: 'operator:read',
        response: operatorServersResponse,
      },
      handler: async (request, reply) => {
        await requireOperator(deps, request, 'read');
        // The leader's view is the datacenter's (it sees every follower's stream): a follower
        // relays it, and answers with its own, saying why, only when no leader answers.
        const own = deps.agent.servers();
        const relayed = await relayToLeader(request, reply, deps.cluster, (err) => {
          own.Problem ??=
            `this is ${own.AnsweredBy}'s own view: the leader did not answer ` + `(${err instanceof Error ? err.message : String(err)})`;
        });
        if (relayed) return relayed;
        if (own.Leader === null) own.Problem ??= `this is ${own.AnsweredBy}'s own view: no leader is known`;
        return sendJSON(request, reply, own);
      },
    },
  });

  resource(app, '/v1/operator/raft/transfer-leader', {
    POST: {
      doc: {
        summary:
          "Hands this datacenter's leadership to ?id=NAME, or to a member of the leader's synchronous set (only a member holds " +
          'every acknowledged write): the leader steps down and follows, and the answer comes once the new leader leads. ' +
          "Asked of any server of the datacenter (through its coordinator); Consul's transfer-leader. Before restarting a leader",
        permission: 'operator:write',
        response: transferLeaderResponse,
        query: { id: 'The server (its node name) to hand leadership to; a member of the synchronous set' },
      },
      forward: 'here',
      handler: async (request, reply) => {
        const identity = await requireOperator(deps, request, 'write');
        const id = queryParam(request, 'id');
        const by = identity.anonymous ? 'anonymous' : identity.token.AccessorID;
        return sendJSON(request, reply, await deps.agent.transferLeader(id === undefined || id === '' ? undefined : id, by));
      },
    },
  });

  resource(app, '/v1/catalog/datacenters', {
    GET: {
      doc: { summary: 'Known datacenters, primary first', permission: 'none', response: z.array(z.string()) },
      handler: async (request, reply) => sendJSON(request, reply, deps.agent.datacenters()),
    },
  });
}

/** Each server's release and versions, and finalizing an upgrade (docs/upgrading.md, "Upgrading"). */
function upgradeRoutes(app: FastifyInstance, deps: AgentRoutesDeps): void {
  resource(app, '/v1/operator/upgrade', {
    GET: {
      doc: {
        summary:
          'Every server of every datacenter: the release it runs and the versions it speaks; the level a finalize would set; what ' +
          'waits for it. From the picture the primary keeps and sends every datacenter',
        permission: 'operator:read',
        response: operatorUpgradeResponse,
      },
      handler: async (request, reply) => {
        await requireOperator(deps, request, 'read');
        return sendJSON(request, reply, deps.agent.upgrade());
      },
    },
    PUT: {
      doc: {
        summary:
          '?finalize: the upgrade is finished, and the features that need every server come on; refused (409) while any server ' +
          'runs an older release or is not heard from. At the primary (a secondary sends it there, a follower to its leader). ' +
          'Needs operator:write',
        permission: 'operator:write',
        response: operatorUpgradeResponse,
      },
      forward: 'always',
      handler: async (request, reply) => {
        await requireOperator(deps, request, 'write');
        if ((request.query as Record<string, unknown>).finalize === undefined)
          throw invalid('Missing action: PUT /v1/operator/upgrade takes ?finalize');
        return sendJSON(request, reply, await deps.agent.finalize());
      },
    },
  });
}

/** The primary this server follows, its promotion and a planned transfer (docs/datacenters.md), and what peers ask of it. */
function primaryRoutes(app: FastifyInstance, deps: AgentRoutesDeps): void {
  resource(app, '/v1/operator/primary', {
    GET: {
      doc: {
        summary: 'The primary this server follows: its datacenter, its epoch, the last primary index applied here, when it was last heard',
        permission: 'operator:read',
        response: operatorPrimaryResponse,
      },
      handler: async (request, reply) => {
        await requireOperator(deps, request, 'read');
        // The leader replicates for its datacenter: a follower relays its answer, and gives its own only when no leader answers.
        const relayed = await relayToLeader(request, reply, deps.cluster);
        if (relayed) return relayed;
        return sendJSON(request, reply, deps.agent.primary());
      },
    },
    PUT: {
      doc: {
        summary:
          '?promote: this secondary datacenter becomes the primary, with the next epoch (add &force while it still hears the ' +
          'primary); the answer names the recovery point. Needs operator:write; a follower relays it to its leader',
        permission: 'operator:write',
        response: promotionResponse,
      },
      handler: async (request, reply) => {
        const query = request.query as Record<string, unknown>;
        const promote = query.promote !== undefined;
        const transfer = queryParam(request, 'transfer');
        if (!promote && transfer === undefined)
          throw invalid(
            'Missing action: PUT /v1/operator/primary takes ?promote (at a secondary) or ?transfer=DATACENTER (at the primary)',
          );
        if (promote && transfer !== undefined) throw invalid('Conflicting actions: ?promote and ?transfer cannot be asked together');
        await requireOperator(deps, request, 'write', transfer !== undefined);
        const relayed = await relayToLeader(request, reply, deps.cluster);
        if (relayed) return relayed;
        if (transfer !== undefined) {
          if (!/^[a-zA-Z0-9_-]{1,64}$/.test(transfer)) throw invalid('Invalid transfer: expected a datacenter name');
          return sendJSON(request, reply, await deps.agent.transfer(transfer));
        }
        const force = query.force !== undefined && query.force !== 'false';
        return sendJSON(request, reply, await deps.agent.promote(force));
      },
    },
  });

  resource(app, '/v1/internal/primary', {
    GET: {
      doc: {
        summary:
          'The primary this datacenter follows (or itself) and its epoch: what other datacenters ask to learn of a newer primary. ' +
          "The primary's servers (Addresses) only to a token with acl:write (a replication token) or operator:read; to anyone else, none",
        permission: 'none',
        response: primaryPlacementResponse,
      },
      handler: async (request, reply) => {
        const placement = deps.agent.placement();
        return sendJSON(request, reply, (await mayKnowServers(deps, request)) ? placement : { ...placement, Addresses: [] });
      },
    },
  });
}

/** Whether this server can do its job (load balancers, supervisors). */
function healthRoute(app: FastifyInstance, deps: AgentRoutesDeps): void {
  resource(app, '/v1/agent/health', {
    GET: {
      doc: {
        summary:
          'Whether this server can do its job: 200 when every check passes, else 503 naming the failing checks (anonymous; why they ' +
          'fail only to agent:read). ?role=leader: 200 only at the leader',
        permission: 'none',
        response: agentHealthResponse,
        query: { role: '"leader": passing only at the leader of the datacenter (for load balancers that send writes)' },
      },
      handler: async (request, reply) => {
        const role = queryParam(request, 'role');
        if (role !== undefined && role !== '' && role !== 'leader') throw invalid('Invalid role: expected "leader"');
        const checks = deps.agent.health();
        if (role === 'leader')
          checks.push({
            Name: 'role',
            Passing: deps.agent.isLeader(),
            Output: deps.agent.isLeader() ? 'this server leads' : 'this server is a follower',
          });
        // The why of each check is for operators; the names and the answer are for anyone (load balancers).
        let details = false;
        const secret = requestSecret(request);
        if (secret !== undefined) {
          const identity = await Promise.resolve()
            .then(() => deps.resolver.resolve(secret, request.ip))
            .catch(() => undefined);
          const a = identity?.authorizer;
          details = a?.allows('agent', deps.agent.nodeName, 'read', a.tokenPartition, a.tokenNamespace) === true;
        }
        const passing = checks.every((c) => c.Passing);
        void reply.code(passing ? 200 : 503);
        return sendJSON(request, reply, {
          Status: passing ? 'passing' : 'critical',
          Checks: checks.map((c) => ({ Name: c.Name, Passing: c.Passing, ...(details ? { Output: c.Output } : {}) })),
        });
      },
    },
  });
}

/** This server's recent audit events (docs/audit.md: Audit log). */
function auditRoute(app: FastifyInstance, deps: AgentRoutesDeps): void {
  resource(app, '/v1/operator/audit', {
    GET: {
      doc: {
        summary:
          "This server's recent audit events, newest first (operator:read and acl:read). With ?after=N, the events after sequence N, " +
          'oldest first (to follow the log)',
        permission: 'operator:read',
        response: auditPageResponse,
        query: {
          since: 'Events at or after this time (RFC 3339 or ms)',
          until: 'Events at or before this time',
          type: `Only this event type: ${AUDIT_TYPES.join(', ')}`,
          accessor: "Only events of this caller's AccessorID (or hmac:… for an unknown secret)",
          kind: `Only events that changed an object of this kind: ${AUDIT_OBJECT_KINDS.join(', ')}`,
          id: 'Only events that changed this object (ID or auth method name)',
          limit: 'At most this many (default 100, at most 1000)',
          cursor: 'The NextCursor of the previous page',
          after: 'Follow: events after this sequence number (Latest of an earlier answer), oldest first',
        },
      },
      handler: async (request, reply) => {
        const identity = await deps.resolver.resolve(requestSecret(request), request.ip);
        const a = identity.authorizer;
        const who = identity.anonymous ? 'the anonymous token (no token was sent)' : `token with AccessorID '${identity.token.AccessorID}'`;
        if (a.operatorAccess() === 'none')
          throw deniedWithReason(identity, `Permission denied: ${who} lacks permission 'operator:read'`, 'operator', '', 'read');
        if (!a.canRead(a.tokenPartition, a.tokenNamespace))
          throw deniedWithReason(identity, `Permission denied: ${who} lacks permission 'acl:read'`, 'acl', '', 'read');
        const log = deps.audit;
        if (!log) return sendJSON(request, reply, { Events: [], Latest: 0 });
        const limit = countParam('limit', queryParam(request, 'limit'), 100, 1000);
        const after = queryParam(request, 'after');
        if (after !== undefined && after !== '') {
          const events = log.after(countParam('after', after, 0, Number.MAX_SAFE_INTEGER), limit);
          return sendJSON(request, reply, {
            Events: events.map((e) => e.event),
            Latest: events.length > 0 ? (events[events.length - 1] as { seq: number }).seq : log.latest(),
          });
        }
        const cursor = queryParam(request, 'cursor');
        if (cursor !== undefined && cursor !== '' && !/^\d{1,15}$/.test(cursor))
          throw invalid('Invalid cursor: expected the NextCursor of an earlier answer');
        const filter = {
          limit,
          ...optional('since', timeParam('since', queryParam(request, 'since'))),
          ...optional('until', timeParam('until', queryParam(request, 'until'))),
          ...optional('type', auditTypeParam(queryParam(request, 'type'))),
          ...optional('accessor', queryParam(request, 'accessor') || undefined),
          ...optional('kind', auditKindParam(queryParam(request, 'kind'))),
          ...optional('id', queryParam(request, 'id') || undefined),
          ...optional('before', cursor ? Number(cursor) : undefined),
        };
        const page = log.query(filter);
        return sendJSON(request, reply, {
          Events: page.events,
          ...(page.next !== undefined ? { NextCursor: String(page.next) } : {}),
          Latest: log.latest(),
        });
      },
    },
  });
}

/** This daemon's configuration and metrics, for agent:read. */
function selfAndMetricsRoutes(app: FastifyInstance, deps: AgentRoutesDeps): void {
  const agentRead = agentReader(deps);
  resource(app, '/v1/agent/self', {
    GET: {
      doc: {
        summary: 'Configuration (without secrets), version and role of this daemon',
        permission: 'agent:read',
        response: agentSelfResponse,
      },
      handler: async (request, reply) => {
        // Where the coordinator is, is for operators: nobody else learns where to plant a leader key.
        const identity = await agentRead(request);
        return sendJSON(request, reply, deps.agent.self(identity.authorizer.operatorAccess() !== 'none'));
      },
    },
  });

  resource(app, '/v1/agent/metrics', {
    GET: {
      doc: {
        summary: 'Metrics: Prometheus text with ?format=prometheus, else JSON',
        permission: 'agent:read',
        response: z.string(),
        responseType: 'text/plain; version=0.0.4',
        query: { format: '"prometheus" for the Prometheus text format' },
      },
      handler: async (request, reply) => {
        await agentRead(request);
        const metrics = deps.metrics.registry;
        if (queryParam(request, 'format') === 'prometheus') {
          return reply.type(metrics.contentType).send(await metrics.metrics());
        }
        return sendJSON(request, reply, await metrics.getMetricsAsJSON());
      },
    },
  });
}

/** `{ [key]: value }` when the value is set, else nothing. */
function optional<K extends string, V>(key: K, value: V | undefined): { [k in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [k in K]?: V };
}

/** The audit endpoint's `type` filter: one of the registered types (a misspelt one would match nothing, silently). */
function auditTypeParam(value: string | undefined): AuditType | undefined {
  if (value === undefined || value === '') return undefined;
  if (!isAuditType(value))
    throw invalid(`Invalid type: ${JSON.stringify(value)} is no audit event type (one of ${AUDIT_TYPES.join(', ')})`);
  return value;
}

function auditKindParam(value: string | undefined): string | undefined {
  if (value === undefined || value === '') return undefined;
  if (!isAuditKind(value))
    throw invalid(`Invalid kind: ${JSON.stringify(value)} is no object kind (one of ${AUDIT_OBJECT_KINDS.join(', ')})`);
  return value;
}
