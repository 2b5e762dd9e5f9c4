import WebSocket from 'ws';
import type { TestDaemon } from './test-daemon.js';

export const WATCH_PATH = '/v1/internal/acl/authorizer/watch';

/**
 * A raw watch connection (opened with `token`, when given): the frames the server sent, how it
 * ended, and the protocol version the server answered (`maxVersion`: ask for versions 2 to it, as
 * a client of this release does; without it the client names none, as a raw client may).
 */
export async function rawWatch(url: string, token: string | undefined, beat = 250, maxVersion?: number) {
  const versions = maxVersion !== undefined ? `&version=2&max=${maxVersion}` : '';
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}${WATCH_PATH}?beat=${beat}${versions}`, {
    ...(token !== undefined ? { headers: { 'X-Service-Token': token } } : {}),
  });
  let version: string | undefined;
  ws.on('upgrade', (res) => {
    version = res.headers['x-service-watch-protocol'] as string | undefined;
  });
  let closed = false;
  ws.on('close', () => (closed = true));
  const frames: Array<Record<string, unknown>> = [];
  const ended = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  ws.on('message', (data) => frames.push(JSON.parse(data.toString()) as Record<string, unknown>));
  // A reset once the watch is open (the server closing it) is how some tests end: it is seen through `ended`.
  ws.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  return {
    ws,
    frames,
    ended,
    version: () => version,
    closed: () => closed,
    send: (frame: unknown) => ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame)),
  };
}

/** Requests the daemon answered on one route, from its own metrics. */
export async function served(d: Pick<TestDaemon, 'api'>, route: string): Promise<number> {
  const text = (await d.api('GET', '/v1/agent/metrics?format=prometheus')).text;
  let n = 0;
  for (const m of text.matchAll(/^watchword_http_requests_total\{([^}]*)\} (\d+)/gm))
    if (m[1]?.includes(`route="${route}"`)) n += Number(m[2]);
  return n;
}

/** How an upgrade to the watch is answered: 101 (a watch), or the status and text of its refusal. */
export function watchUpgrade(url: string, headers: Record<string, string> = {}): Promise<{ status: number; text: string; ws?: WebSocket }> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}${WATCH_PATH}`, { headers });
    ws.on('unexpected-response', (_req, res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => {
        ws.terminate();
        resolve({ status: res.statusCode ?? 0, text });
      });
    });
    ws.on('open', () => resolve({ status: 101, text: '', ws }));
    ws.on('error', () => undefined);
  });
}

/** The daemon's gauges of watches, from its metrics. */
export async function watchGauges(
  d: Pick<TestDaemon, 'api'>,
): Promise<{ watches: number; tokens: number; queued: number; queuedMax: number; closedForBounds: number }> {
  const text = (await d.api('GET', '/v1/agent/metrics?format=prometheus')).text;
  const gauge = (name: string) => Number(new RegExp(`^${name} (\\d+)`, 'm').exec(text)?.[1] ?? Number.NaN);
  return {
    watches: gauge('watchword_authorizer_watches'),
    tokens: gauge('watchword_authorizer_watched_tokens'),
    queued: gauge('watchword_authorizer_watch_queued_bytes'),
    queuedMax: gauge('watchword_authorizer_watch_queued_bytes_max'),
    closedForBounds: gauge('watchword_authorizer_watches_closed_for_bounds'),
  };
}
