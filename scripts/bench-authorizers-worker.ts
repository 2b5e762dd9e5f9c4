/**
 * One process of `npm run bench:authorizers`: CLIENTS enforcing clients, as a service's processes
 * would hold them, each caching every token of SECRETS_FILE. MODE `watch` (the default): each opens
 * its watch with the service's token and makes its first look-ups on it; `http`: no watch, every
 * first look-up a request (the baseline the watch's loading is judged against). Told by its parent (IPC):
 * - `load`: asks every client about every token (first look-ups), then keeps asking about all of
 *   them every 20 s (a token unused for two TTLs is forgotten), and answers `loaded`;
 * - `quiet`: stops asking (the revocations are timed by this process's loop);
 * - `revoke` {secret, at}: answers `refused` with how long after `at` (ms since the epoch, the
 *   moment the parent sent the delete) each client refused the secret;
 * - `close`: closes every client and exits.
 */
import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Authorizer } from '../src/client/authorizer.js';

const [url, secretsFile, count, token, mode = 'watch'] = process.argv.slice(2) as [string, string, string, string, string?];
const secrets = JSON.parse(readFileSync(secretsFile, 'utf8')) as string[];
// Each client opens its watch with the service's own token (it needs acl:read); over HTTP there is none (and no warning about it).
const clients = Array.from({ length: Number(count) }, () =>
  mode === 'http'
    ? // A TTL past the run: the loading is first look-ups only, none forgotten or read again meanwhile.
      new Authorizer({ client: { address: url }, tokenTTL: '1h', onWarning: () => undefined })
    : new Authorizer({ client: { address: url }, token }),
);
const loaded = clients.map(() => 0);
let asking = false;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.timeOrigin + performance.now();
const send = (m: unknown) => process.send?.(m);

async function loadAll(): Promise<void> {
  await Promise.all(
    clients.map(async (authz, c) => {
      let next = 0;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (next < secrets.length) {
            const s = secrets[next++] as string;
            await authz.allowed(s, 'service', 'svc-0', 'read');
            loaded[c] = Math.max(loaded[c] ?? 0, next - 8);
          }
        }),
      );
    }),
  );
}

async function keepAsking(): Promise<void> {
  while (asking) {
    await sleep(20_000);
    if (!asking) return;
    clients.forEach((authz, c) => {
      for (let i = 0; i < (loaded[c] ?? 0); i++) authz.allowed(secrets[i] as string, 'service', 'svc-0', 'read');
    });
  }
}

/** How long this process's event loop was held at most while a revocation was awaited (ms). */
const delay = monitorEventLoopDelay({ resolution: 5 });
delay.enable();

async function revoke(secret: string, at: number): Promise<number[]> {
  delay.reset();
  const seen = new Array<number | undefined>(clients.length).fill(undefined);
  while (seen.some((s) => s === undefined)) {
    if (now() - at > 30_000) throw new Error('a client still allowed a deleted token after 30 s');
    clients.forEach((authz, i) => {
      if (seen[i] === undefined && authz.allowed(secret, 'service', 'svc-0', 'read') === false) seen[i] = now() - at;
    });
    // Looked at every millisecond, not in a busy loop: the processes share one CPU, and a loop
    // spinning in each would keep the others from reading the watch frame they wait for.
    await sleep(1);
  }
  return seen as number[];
}

process.on('message', (m: { t: string; secret?: string; at?: number }) => {
  if (m.t === 'load') {
    // Over HTTP only the loading is timed: re-asking would add the reads of tokens past their TTL to it.
    asking = mode !== 'http';
    void keepAsking();
    void (async () => {
      await loadAll();
      // A first look-up that timed out while this process was busy is not cached: asked again.
      for (let pass = 0; pass < 3 && clients.some((c) => c.size < secrets.length); pass++) await loadAll();
      send({ t: 'loaded', cached: clients.reduce((n, c) => n + c.size, 0), timedOut: clients.reduce((n, c) => n + c.stats().downAnswers, 0) });
    })();
  } else if (m.t === 'quiet') {
    asking = false;
    send({ t: 'quiet' });
  } else if (m.t === 'revoke') {
    void revoke(m.secret as string, m.at as number).then((times) => send({ t: 'refused', times, lagMs: delay.max / 1e6 }));
  } else if (m.t === 'close') {
    for (const c of clients) c.close();
    process.exit(0);
  }
});
send({ t: 'ready' });
