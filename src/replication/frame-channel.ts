// A primary session's channel to its secondary (primary-session.ts): the interface the session
// writes to, and the WebSocket that is one.
import { WebSocket } from 'ws';
import { type PrimaryFrame, encodeFrame } from './protocol.js';

/** What a channel hands the secondary's frames to (a Session). */
export interface FrameReceiver {
  receiveRaw(data: unknown): void;
  ended(): void;
}

/**
 * Where a session's frames go: a WebSocket in the daemon (wsChannel), an array in unit
 * tests. The session never touches a socket itself.
 */
export interface FrameChannel {
  /** Queues a frame; `done` is told once it is written, or why it could not be. */
  send(frame: PrimaryFrame, done: (err?: Error) => void): void;
  /** Bytes queued and not yet written (flow control). */
  readonly buffered: number;
  readonly open: boolean;
  close(code: number, reason: string): void;
  /** Ends the connection at once. */
  terminate(): void;
}

/** A WebSocket as a session's channel: its frames in, the session's frames out. */
export function wsChannel(ws: WebSocket, session: () => FrameReceiver | undefined): FrameChannel {
  ws.on('message', (data) => session()?.receiveRaw(data));
  ws.on('close', () => session()?.ended());
  ws.on('error', () => undefined);
  return {
    send: (frame, done) => {
      if (ws.readyState !== WebSocket.OPEN) return done(new Error('socket closed'));
      ws.send(encodeFrame(frame), (err) => done(err ?? undefined));
    },
    get buffered() {
      return ws.bufferedAmount;
    },
    get open() {
      return ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING;
    },
    close: (code, reason) => ws.close(code, reason),
    terminate: () => ws.terminate(),
  };
}
