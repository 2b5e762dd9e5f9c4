import { z } from 'zod';
import { errorResponse } from '../api/schemas.js';
import type { RouteInfo } from './resource.js';

type JsonSchema = Record<string, unknown>;

/** Query parameters every read of a watched table understands. */
const READ_QUERY: Record<string, string> = {
  index: 'Block until the watched table index exceeds this value',
  wait: 'Longest time to block, a Go duration (default 5m, at most 10m)',
  stale: 'Serve from the local store without checking the primary',
  consistent: 'On a secondary, catch up with the primary before reading',
};

const SCOPE_QUERY: Record<string, string> = {
  ns: 'Namespace (on lists, * for every namespace the caller may read)',
  partition: 'Admin partition',
};

const COMMON_QUERY: Record<string, string> = {
  token: 'The request token (prefer the X-Service-Token header)',
  pretty: 'Indent the JSON output',
};

const INDEX_HEADERS = {
  'X-Service-Index': { description: 'Index of the watched table, for blocking queries (also X-Consul-Index)', schema: { type: 'integer' } },
  'X-Service-KnownLeader': { description: 'Whether the primary is known (also X-Consul-KnownLeader)', schema: { type: 'string' } },
  'X-Service-LastContact': {
    description: 'ms since the last contact with the primary (also X-Consul-LastContact)',
    schema: { type: 'integer' },
  },
};

/** JSON Schema of a zod type, with named sub-schemas lifted into `components.schemas`. */
function schemaOf(type: z.ZodType, io: 'input' | 'output', components: Record<string, JsonSchema>): JsonSchema {
  const json = z.toJSONSchema(type, { io, unrepresentable: 'any', target: 'draft-2020-12' }) as JsonSchema;
  const defs = (json.$defs ?? {}) as Record<string, JsonSchema>;
  delete json.$defs;
  delete json.$schema;
  const rewrite = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(rewrite);
    if (node !== null && typeof node === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(node)) {
        out[k] = k === '$ref' && typeof v === 'string' ? v.replace('#/$defs/', '#/components/schemas/') : rewrite(v);
      }
      return out;
    }
    return node;
  };
  for (const [name, def] of Object.entries(defs)) components[name] = rewrite(def) as JsonSchema;
  const id = json.id;
  if (typeof id === 'string') {
    delete json.id;
    components[id] = rewrite(json) as JsonSchema;
    return { $ref: `#/components/schemas/${id}` };
  }
  return rewrite(json) as JsonSchema;
}

const toPath = (url: string): { path: string; params: string[] } => {
  const params: string[] = [];
  const path = url
    .split('/')
    .map((part) => {
      if (part.startsWith(':')) {
        params.push(part.slice(1));
        return `{${part.slice(1)}}`;
      }
      if (part === '*') {
        params.push('name');
        return '{name}';
      }
      return part;
    })
    .join('/');
  return { path, params };
};

const operationId = (method: string, url: string): string =>
  method.toLowerCase() +
  url
    .replace(/^\/v1/, '')
    .split(/[/\-:*]+/)
    .filter(Boolean)
    .map((p) => p[0]?.toUpperCase() + p.slice(1))
    .join('');

/** The OpenAPI 3.1 document of every registered route, from the routes' zod schemas. */
export function openAPIDocument(routes: readonly RouteInfo[], version: string): Record<string, unknown> {
  const components: Record<string, JsonSchema> = {};
  const errorRef = schemaOf(errorResponse, 'output', components);
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const { path, params } = toPath(route.url);
    const { doc } = route;
    const isACL = route.url.startsWith('/v1/acl/');
    const query: Record<string, string> = {
      ...(isACL ? SCOPE_QUERY : {}),
      ...(route.table ? READ_QUERY : {}),
      ...(doc.query ?? {}),
      ...COMMON_QUERY,
    };
    const parameters = [
      ...params.map((name) => ({ name, in: 'path', required: true, schema: { type: 'string' } })),
      ...Object.entries(query).map(([name, description]) => ({
        name,
        in: 'query',
        required: false,
        description,
        schema: { type: 'string' },
      })),
      ...(isACL
        ? [
            {
              name: 'X-Service-Namespace',
              in: 'header',
              required: false,
              description: 'Namespace (also X-Consul-Namespace)',
              schema: { type: 'string' },
            },
            {
              name: 'X-Service-Partition',
              in: 'header',
              required: false,
              description: 'Partition (also X-Consul-Partition)',
              schema: { type: 'string' },
            },
          ]
        : []),
    ];
    const ok = doc.responseType
      ? {
          description: 'OK',
          content: {
            [doc.responseType]: { schema: { type: 'string' } },
            'application/json': { schema: schemaOf(z.unknown(), 'output', components) },
          },
        }
      : {
          description: 'OK',
          ...(route.table ? { headers: INDEX_HEADERS } : {}),
          content: { 'application/json': { schema: schemaOf(doc.response, 'output', components) } },
        };
    const operation: Record<string, unknown> = {
      operationId: operationId(route.method, route.url),
      summary: doc.summary,
      description: `Permission: ${doc.permission}.`,
      tags: [route.url.split('/')[2] ?? 'v1'],
      parameters,
      responses: {
        '200': ok,
        '4XX': { description: 'Client error', content: { 'application/json': { schema: errorRef } } },
        '5XX': {
          description: 'Server error (PRIMARY_UNAVAILABLE, STORE_UNAVAILABLE, FORWARD_LOOP, INTERNAL)',
          content: { 'application/json': { schema: errorRef } },
        },
      },
      ...(doc.permission === 'none' ? { security: [] } : {}),
    };
    if (doc.body) {
      operation.requestBody = {
        required: !doc.bodyOptional,
        description: 'JSON whatever the Content-Type; field names match case-insensitively',
        content: { 'application/json': { schema: schemaOf(doc.body, 'input', components) } },
      };
    }
    (paths[path] ??= {})[route.method.toLowerCase()] = operation;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'watchword',
      version,
      description: 'ACL tokens, roles and policies, modelled on the Consul ACL API.',
    },
    servers: [{ url: '/' }],
    security: [{ serviceToken: [] }, { consulToken: [] }, { bearer: [] }],
    paths,
    components: {
      schemas: components,
      securitySchemes: {
        serviceToken: { type: 'apiKey', in: 'header', name: 'X-Service-Token' },
        consulToken: { type: 'apiKey', in: 'header', name: 'X-Consul-Token' },
        bearer: { type: 'http', scheme: 'bearer' },
      },
    },
  };
}
