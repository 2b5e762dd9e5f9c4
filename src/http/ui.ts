import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance } from 'fastify';

const require = createRequire(import.meta.url);
/** The UI's own files: src/ui/public, from the sources or from dist/ alike. */
const PUBLIC = fileURLToPath(new URL('../../src/ui/public/', import.meta.url));
/** Preact, htm and hooks in one ES module: the UI needs no build step and no import map. */
const HTM = join(dirname(dirname(require.resolve('htm'))), 'preact');
const SWAGGER = dirname(require.resolve('swagger-ui-dist/package.json'));

/**
 * Nothing from another origin: scripts, styles, images, fonts and requests come from this
 * daemon only; no frames, no plugins. (Swagger UI sets inline styles on its elements.)
 */
export const UI_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** The web UI (SPEC §15) at /ui/, the API reference at /ui/api/, and / sending browsers there. */
export async function registerUI(app: FastifyInstance): Promise<void> {
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
  await app.register(fastifyStatic, { root: PUBLIC, prefix: '/ui/', index: ['index.html'], decorateReply: false, cacheControl: false });
  await app.register(fastifyStatic, { root: HTM, prefix: '/ui/vendor/htm/', allowedPath: (path) => path === '/standalone.module.js', decorateReply: false });
  await app.register(fastifyStatic, {
    root: SWAGGER,
    prefix: '/ui/vendor/swagger/',
    allowedPath: (path) => ['/swagger-ui-bundle.js', '/swagger-ui.css', '/favicon-32x32.png'].includes(path),
    decorateReply: false,
  });
}
