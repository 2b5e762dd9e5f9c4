import http from 'node:http';
import { describe, expect, it } from 'vitest';
import { startTestDaemon, waitFor } from '../helpers/test-daemon.js';

describe('shutdown', () => {
  it('answers blocked reads with current data, drops idle keep-alive sockets, and closes', async () => {
    const d = await startTestDaemon();
    const agent = new http.Agent({ keepAlive: true, keepAliveMsecs: 60_000 });
    const get = (path: string) =>
      new Promise<number>((resolve, reject) => {
        http
          .get(`${d.url}${path}`, { agent, headers: { 'X-Service-Token': d.management } }, (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          })
          .on('error', reject);
      });
    // Idle keep-alive connections, and blocked reads that would wait for minutes.
    await Promise.all([get('/v1/acl/tokens'), get('/v1/acl/policies'), get('/v1/acl/roles')]);
    const index = Number((await d.api('GET', '/v1/acl/tokens')).headers.get('x-service-index'));
    const blocked = Array.from({ length: 5 }, () => get(`/v1/acl/tokens?index=${index}&wait=10m`));
    await waitFor(() => d.daemon.metrics.blockingInFlight() === 5);
    await d.close();
    expect(await Promise.all(blocked)).toEqual([200, 200, 200, 200, 200]);
    agent.destroy();
  });
});
