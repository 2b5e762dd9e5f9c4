import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';

/** Who is told of a refusal on a socket: the daemon's upgrade entry audits and logs it. */
const told = new WeakMap<Duplex, (status: number, reason: string) => void>();

/**
 * Tells `listener` when an upgrade on `socket` is refused (by whichever handler refuses it), so
 * that every refused upgrade is audited and logged in one place, as every refused route is.
 */
export function whenRefused(socket: Duplex, listener: (status: number, reason: string) => void): void {
  told.set(socket, listener);
}

/** Answers an upgrade request that is not taken (a peer stream refused) with a plain HTTP error, and closes the socket. */
export function refuse(socket: Duplex, status: number, reason: string, headers: Record<string, string> = {}): void {
  told.get(socket)?.(status, reason);
  told.delete(socket);
  const body = `${reason}\n`;
  const extra = Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ` +
      `${Buffer.byteLength(body)}\r\n${extra}Connection: close\r\n\r\n${body}`,
  );
}
