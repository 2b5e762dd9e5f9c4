import type { FastifyReply, FastifyRequest } from 'fastify';
import { Readable } from 'node:stream';
import { JSONStream, JSONText } from '../service/views.js';
import { queryFlag } from './request.js';

/** JSON text of a value, indented with `?pretty`. */
export function toJSONText(request: FastifyRequest, value: unknown): string {
  let pretty = false;
  try {
    pretty = queryFlag(request, 'pretty');
  } catch {
    // A malformed query cannot stop an error from being sent.
  }
  if (value instanceof JSONStream) return toJSONText(request, value.whole());
  if (value instanceof JSONText) return pretty ? `${JSON.stringify(JSON.parse(value.text), null, 4)}\n` : value.text;
  return pretty ? `${JSON.stringify(value, null, 4)}\n` : JSON.stringify(value);
}

/** Sends a JSON value (booleans included), indented with `?pretty`. */
export function sendJSON(request: FastifyRequest, reply: FastifyReply, value: unknown): FastifyReply {
  return reply.type('application/json; charset=utf-8').send(toJSONText(request, value));
}

/** Sends an answer made as it is sent (a whole list of many tokens), chunked, with the read's index headers. */
export function sendJSONStream(request: FastifyRequest, reply: FastifyReply, answer: JSONStream): FastifyReply {
  const headers = request.server.readHeaders?.(request);
  if (headers) void reply.headers(headers);
  return reply.type('application/json; charset=utf-8').send(Readable.from(answer.chunks(), { objectMode: false }));
}

/** Sends JSON text produced by a (possibly shared) read, with the read's index headers. */
export function sendJSONText(request: FastifyRequest, reply: FastifyReply, text: string): FastifyReply {
  const headers = request.server.readHeaders?.(request);
  if (headers) void reply.headers(headers);
  return reply.type('application/json; charset=utf-8').send(text);
}

/** Sends a write's result with the index of its change. */
export function sendWrite(request: FastifyRequest, reply: FastifyReply, result: { value: unknown; index: number }): FastifyReply {
  void reply.header('X-Service-Index', result.index).header('X-Consul-Index', result.index);
  return sendJSON(request, reply, result.value);
}
