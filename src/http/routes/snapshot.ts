import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { snapshotRestoreResponse } from '../../api/schemas.js';
import { WatchwordError } from '../../domain/errors.js';
import { requestContext } from '../pipeline.js';
import { sendJSON } from '../respond.js';
import { resource } from '../resource.js';
import type { AppDeps } from '../deps.js';

const tooLarge = (max: number) => new WatchwordError('BODY_TOO_LARGE', `Snapshot is too large (limit ${max} bytes: snapshot_max_bytes)`);

/** Passes the bytes on, failing with 413 once more than `max` went through. */
class Limit extends Transform {
  private seen = 0;
  constructor(private readonly max: number) {
    super();
  }
  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.seen += chunk.length;
    if (this.seen > this.max) return done(tooLarge(this.max));
    done(null, chunk);
  }
}

/**
 * A refused upload: its answer goes out at once; the body the client is still sending is
 * discarded (never kept) for a second, so that the client reads the answer before the
 * connection is cut (a socket closed on unread bytes resets, and the reset can overtake
 * the answer), and then the connection is closed.
 */
function cutAfterAnswer(req: IncomingMessage, res: ServerResponse): void {
  res.once('finish', () => {
    if (req.complete) return;
    req.resume();
    setTimeout(() => {
      if (!req.complete) req.socket.destroy();
    }, 1000).unref();
  });
}

/**
 * Snapshots (docs/configuration.md, "Configuration" (Backup and restore) and "Security"). A restore is authorized before a byte of its body is read
 * (an anonymous 600 MB upload is answered 403 at once and its connection closed), then
 * streamed through a byte limit to a 0600 file in the data dir and verified from there.
 * At a follower the same check runs first, then the stream goes on to the leader.
 */
/** What the snapshot routes use. */
export type SnapshotRoutesDeps = Pick<AppDeps, 'snapshots' | 'snapshotUploads'>;

export async function snapshotRoutes(app: FastifyInstance, deps: SnapshotRoutesDeps): Promise<void> {
  const { snapshots } = deps;
  const uploads = deps.snapshotUploads ?? { maxBytes: 512 * 1024 ** 2, dir: '.' };
  void app.register(async (child) => {
    // The body is the raw file whatever the Content-Type (curl --data-binary sends a form
    // type): handed on as a stream, never buffered.
    child.removeAllContentTypeParsers();
    child.addContentTypeParser('*', (_request, payload, done) => done(null, payload.pipe(new Limit(uploads.maxBytes))));
    child.addHook('onRequest', async (request, reply) => {
      if (request.method !== 'PUT') return;
      try {
        await snapshots.authorizeRestore(requestContext(request));
        const declared = Number(request.headers['content-length']);
        if (Number.isFinite(declared) && declared > uploads.maxBytes) throw tooLarge(uploads.maxBytes);
      } catch (err) {
        cutAfterAnswer(request.raw, reply.raw);
        throw err;
      }
    });
    resource(child, '/v1/snapshot', {
      GET: {
        doc: {
          summary: "A snapshot of this datacenter's state (every global object and its Local tokens)",
          permission: 'acl:write + operator:write',
          response: z.string(),
          responseType: 'application/octet-stream',
        },
        handler: async (request, reply) => {
          const { stream, index } = await snapshots.save(requestContext(request));
          void reply
            .header('X-Service-Index', index)
            .header('X-Consul-Index', index)
            .header('Content-Disposition', 'attachment; filename="watchword.snap"');
          return reply.type('application/octet-stream').send(stream);
        },
      },
      PUT: {
        doc: {
          summary: 'Restore a snapshot: on the primary every global object (and its own Local tokens), on a secondary its Local tokens',
          permission: 'acl:write + operator:write',
          body: z.string().describe(`The snapshot file, as saved (at most snapshot_max_bytes)`),
          response: snapshotRestoreResponse,
        },
        handler: async (request, reply) => {
          const file = join(uploads.dir, `snapshot-upload-${randomBytes(8).toString('hex')}.tmp`);
          try {
            const body = request.body as NodeJS.ReadableStream | undefined;
            if (!body) throw new WatchwordError('INVALID_REQUEST', 'Invalid snapshot: the request has no body');
            await pipeline(body, createWriteStream(file, { mode: 0o600, flags: 'wx' })).catch((err: unknown) => {
              cutAfterAnswer(request.raw, reply.raw);
              throw err;
            });
            const result = await snapshots.restoreFile(requestContext(request), file);
            void reply.header('X-Service-Index', result.Index).header('X-Consul-Index', result.Index);
            return sendJSON(request, reply, result);
          } finally {
            await rm(file, { force: true });
          }
        },
      },
    });
  });
}
