import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance } from 'fastify';
import { AUDIT_OBJECT_KINDS, AUDIT_TYPES } from '../domain/audit-types.js';

const require = createRequire(import.meta.url);
/** The UI's own files: src/ui/public, from the sources or from dist/ alike. */
const PUBLIC = fileURLToPath(new URL('../../src/ui/public/', import.meta.url));
/** The declared packages' own ES modules, served as they ship: Preact, its hooks, htm. */
const PREACT = dirname(require.resolve('preact'));
const PREACT_HOOKS = dirname(require.resolve('preact/hooks'));
const HTM = dirname(require.resolve('htm'));
const SWAGGER = dirname(require.resolve('swagger-ui-dist/package.json'));

/**
 * The hash of the page's import map (the one inline script it has), so that the policy can
 * allow exactly it: module specifiers `preact`, `preact/hooks` and `htm` resolve to the files
 * above, and no other inline script runs.
 */
function importMapHash(): string {
  const page = readFileSync(`${PUBLIC}index.html`, 'utf8');
  const map = /<script type="importmap">([\s\S]*?)<\/script>/.exec(page)?.[1];
  if (map === undefined) throw new Error('src/ui/public/index.html has no import map');
  return `'sha256-${createHash('sha256').update(map).digest('base64')}'`;
}

/**
 * Nothing from another origin: scripts, styles, images, fonts and requests come from this
 * daemon only; no frames, no plugins. (Swagger UI sets inline styles on its elements.)
 */
export const UI_CSP = [
  "default-src 'self'",
  `script-src 'self' ${importMapHash()}`,
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** The web UI (docs/operations.md, "Web UI") at /ui/, the API reference at /ui/api/, and / sending browsers there. */
export async function registerUI(app: FastifyInstance, options: { datacenter: string }): Promise<void> {
  app.addHook('onSend', async (request, reply, payload) => {
    if (request.url === '/ui' || request.url.startsWith('/ui/')) {
      void reply.header('Content-Security-Policy', UI_CSP);
      void reply.header('X-Content-Type-Options', 'nosniff');
      void reply.header('Referrer-Policy', 'no-referrer');
    }
    return payload;
  });
  app.get('/', async (_request, reply) => reply.redirect('/ui/'));
  app.get('/ui', async (_request, reply) => reply.redirect('/ui/'));
  app.get('/ui/api', async (_request, reply) => reply.redirect('/ui/api/'));
  app.get('/docs', async (_request, reply) => reply.redirect('/ui/api/'));
  // What the page needs before any call that a token may be refused (/v1/agent/self needs agent:read).
  app.get('/ui/settings.json', async (_request, reply) =>
    reply.type('application/json; charset=utf-8').send(JSON.stringify({ Datacenter: options.datacenter })),
  );
  // The audit event types and object kinds the Audit page filters by: the registry's (domain/audit-types.ts).
  const auditTypes =
    `export const AUDIT_TYPES = ${JSON.stringify(AUDIT_TYPES)};\n` + `export const AUDIT_KINDS = ${JSON.stringify(AUDIT_OBJECT_KINDS)};\n`;
  app.get('/ui/audit-types.js', async (_request, reply) => reply.type('text/javascript; charset=utf-8').send(auditTypes));
  await app.register(fastifyStatic, { root: PUBLIC, prefix: '/ui/', index: ['index.html'], decorateReply: false, cacheControl: false });
  const vendor = (root: string, prefix: string, file: string) =>
    app.register(fastifyStatic, { root, prefix, allowedPath: (path) => path === `/${file}`, decorateReply: false });
  await vendor(PREACT, '/ui/vendor/preact/', 'preact.module.js');
  await vendor(PREACT_HOOKS, '/ui/vendor/preact-hooks/', 'hooks.module.js');
  await vendor(HTM, '/ui/vendor/htm/', 'htm.module.js');
  await app.register(fastifyStatic, {
    root: SWAGGER,
    prefix: '/ui/vendor/swagger/',
    allowedPath: (path) => ['/swagger-ui-bundle.js', '/swagger-ui.css', '/favicon-32x32.png'].includes(path),
    decorateReply: false,
  });
}
