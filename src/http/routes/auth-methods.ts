import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import {
  authMethodBody,
  authMethodResponse,
  bindingRuleBody,
  bindingRuleResponse,
  deletedResponse,
  loginBody,
  tokenResponse,
} from '../../api/schemas.js';
import type { AppDeps } from '../deps.js';
import { WatchwordError } from '../../domain/errors.js';
import { RateLimiter } from '../../transport/rate-limit.js';
import { decodeBody, parseJsonBody } from '../body.js';
import { Written } from '../direct.js';
import { writesHere } from '../forward.js';
import { queryParam } from '../request.js';
import { requestContext } from '../pipeline.js';
import { sendWrite } from '../respond.js';
import { resource } from '../resource.js';

/** Auth methods, binding rules, login and logout (docs/http-api.md, "HTTP API"). */
/** What the authMethod routes use. */
export type AuthMethodRoutesDeps = Pick<AppDeps, 'authMethods' | 'bindingRules' | 'login' | 'cluster' | 'loginRate' | 'reads' | 'store'>;

export async function authMethodRoutes(app: FastifyInstance, deps: AuthMethodRoutesDeps): Promise<void> {
  methodRoutes(app, deps);
  bindingRuleRoutes(app, deps);
  loginRoutes(app, deps);
}

/** Auth methods: create, read, update, delete, list. */
function methodRoutes(app: FastifyInstance, deps: AuthMethodRoutesDeps): void {
  const { authMethods } = deps;
  resource(app, '/v1/acl/auth-method', {
    PUT: {
      doc: { summary: 'Create an auth method', permission: 'acl:write', body: authMethodBody, response: authMethodResponse },
      forward: 'always',
      handler: async (request, reply) =>
        sendWrite(
          request,
          reply,
          await authMethods.create(requestContext(request), decodeBody(authMethodBody, parseJsonBody(request.body))),
        ),
    },
  });

  resource(app, '/v1/acl/auth-method/:name', {
    GET: {
      doc: { summary: 'Read an auth method', permission: 'acl:read', response: authMethodResponse },
      table: 'authMethods',
      handler: async (request, reply) =>
        deps.reads.serve(request, reply, 'authMethods', 'read', () => authMethods.read(requestContext(request), request.params.name)),
    },
    PUT: {
      doc: {
        summary: 'Update an auth method (full replacement; Type cannot change)',
        permission: 'acl:write',
        body: authMethodBody,
        response: authMethodResponse,
      },
      forward: 'always',
      handler: async (request, reply) =>
        sendWrite(
          request,
          reply,
          await authMethods.update(requestContext(request), request.params.name, decodeBody(authMethodBody, parseJsonBody(request.body))),
        ),
    },
    DELETE: {
      doc: {
        summary: 'Delete an auth method with its binding rules and the tokens it issued',
        permission: 'acl:write',
        response: deletedResponse,
      },
      forward: 'always',
      handler: async (request, reply) => sendWrite(request, reply, await authMethods.delete(requestContext(request), request.params.name)),
    },
  });

  resource(app, '/v1/acl/auth-methods', {
    GET: {
      doc: { summary: 'List auth methods (without Config)', permission: 'acl:read', response: z.array(authMethodResponse) },
      table: 'authMethods',
      handler: async (request, reply) =>
        deps.reads.serve(request, reply, 'authMethods', 'list', () => authMethods.list(requestContext(request))),
    },
  });
}

/** Binding rules: create, read, update, delete, list. */
function bindingRuleRoutes(app: FastifyInstance, deps: AuthMethodRoutesDeps): void {
  const { bindingRules } = deps;
  resource(app, '/v1/acl/binding-rule', {
    PUT: {
      doc: { summary: 'Create a binding rule', permission: 'acl:write', body: bindingRuleBody, response: bindingRuleResponse },
      forward: 'always',
      handler: async (request, reply) =>
        sendWrite(
          request,
          reply,
          await bindingRules.create(requestContext(request), decodeBody(bindingRuleBody, parseJsonBody(request.body))),
        ),
    },
  });

  resource(app, '/v1/acl/binding-rule/:id', {
    GET: {
      doc: { summary: 'Read a binding rule', permission: 'acl:read', response: bindingRuleResponse },
      table: 'bindingRules',
      handler: async (request, reply) =>
        deps.reads.serve(request, reply, 'bindingRules', 'read', () => bindingRules.read(requestContext(request), request.params.id)),
    },
    PUT: {
      doc: {
        summary: 'Update a binding rule (AuthMethod cannot change)',
        permission: 'acl:write',
        body: bindingRuleBody,
        response: bindingRuleResponse,
      },
      forward: 'always',
      handler: async (request, reply) =>
        sendWrite(
          request,
          reply,
          await bindingRules.update(requestContext(request), request.params.id, decodeBody(bindingRuleBody, parseJsonBody(request.body))),
        ),
    },
    DELETE: {
      doc: { summary: 'Delete a binding rule', permission: 'acl:write', response: deletedResponse },
      forward: 'always',
      handler: async (request, reply) => sendWrite(request, reply, await bindingRules.delete(requestContext(request), request.params.id)),
    },
  });

  resource(app, '/v1/acl/binding-rules', {
    GET: {
      doc: {
        summary: 'List binding rules',
        permission: 'acl:read',
        response: z.array(bindingRuleResponse),
        query: { authmethod: 'Only the rules of this auth method' },
      },
      table: 'bindingRules',
      handler: async (request, reply) => {
        const method = queryParam(request, 'authmethod');
        return deps.reads.serve(request, reply, 'bindingRules', 'list', () => bindingRules.list(requestContext(request), method));
      },
    },
  });

  // Each login may cost a round trip to an identity provider: limited per client by default.
}

/** Login (limited per client) and logout. */
function loginRoutes(app: FastifyInstance, deps: AuthMethodRoutesDeps): void {
  const { login } = deps;
  const loginRate = deps.loginRate ?? { rate: 10, burst: 20 };
  const loginLimiter = new RateLimiter(loginRate.rate, Math.max(1, loginRate.burst));
  let appliedBurst = loginRate.burst;
  // The direct path takes logins only where this server makes writes itself; at a secondary or a
  // follower Fastify's route sends a global method's logins on (and makes Local ones here).
  const here = () => writesHere(deps.cluster);
  resource(app, '/v1/acl/login', {
    POST: {
      doc: {
        summary: 'Exchange a bearer token from an auth method for a token (no ACL token needed)',
        permission: 'none',
        body: loginBody,
        response: tokenResponse,
      },
      // A global-locality method's tokens are made at the primary; Local ones here.
      forward: {
        global: (request) =>
          login.method(requestContext(request), decodeBody(loginBody, parseJsonBody(request.body)))?.TokenLocality === 'global',
      },
      logic: {
        when: here,
        admit: (ctx) => {
          if (loginRate.rate <= 0) return;
          // The daemon changes loginRate in place on a reload (SIGHUP).
          if (loginLimiter.rate !== loginRate.rate || appliedBurst !== loginRate.burst) {
            loginLimiter.set(loginRate.rate, Math.max(1, loginRate.burst));
            appliedBurst = loginRate.burst;
          }
          const client = ctx.request?.remote ?? ctx.client ?? '';
          const wait = loginLimiter.take(client);
          if (wait > 0)
            throw new WatchwordError(
              'RATE_LIMITED',
              `Too many logins from ${client}: the limit is ${loginRate.rate} per second (login_rate); retry in ${wait} s`,
              { retryAfter: wait },
            );
        },
        run: async ({ ctx, body }) => {
          const { value, index } = await login.login(ctx, decodeBody(loginBody, parseJsonBody(body)));
          return new Written(value, index);
        },
      },
    },
  });

  resource(app, '/v1/acl/logout', {
    POST: {
      doc: { summary: "Delete the request's token, if a login created it", permission: 'none', response: deletedResponse },
      // A global login token is deleted at the primary.
      forward: {
        global: (request) => {
          const secret = requestContext(request).secret;
          const token = secret ? deps.store.reader.getTokenBySecret(secret) : undefined;
          return token !== undefined && !token.Local;
        },
      },
      handler: async (request, reply) => sendWrite(request, reply, await login.logout(requestContext(request))),
    },
  });
}
