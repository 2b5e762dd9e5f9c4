/**
 * The decision figures of docs/development.md, "Development" and "Enforcing policies in your service": POST /v1/internal/acl/authorize with 1 check and
 * with 16 checks, against the bare Fastify route, in the same run. The daemon (on the seeded
 * data dir) and the bare route run on one core (taskset -c 1), the load generator (this
 * process) on the other (taskset -c 0); rounds alternate between the three and the median of
 * each is compared. Without taskset (or with one core) nothing is pinned, and it says so.
 */
import autocannon from 'autocannon';
import { medianOf, pinSelf, startDaemonAndBaseline, unpinSelf } from './bench-process.js';
import { Authorizer } from '../src/client/authorizer.js';
import type { Access } from '../src/domain/rules/decisions.js';

export interface AuthorizeBench {
  bare: { reqPerSec: number; p99ms: number };
  one: { reqPerSec: number; p99ms: number };
  sixteen: { reqPerSec: number; p99ms: number };
  /** The enforcing client in this process: 1,000,000 allowed() calls on a cached token, median ms of the rounds. */
  enforcing: { calls: number; medianMs: number; roundsMs: number[] };
  pinned: boolean;
  rounds: number;
}

/** A service's token as services carry them: a service identity, a role and a policy of a few rules. */
const RULES = [
  'service_prefix "" { policy = "read" }',
  'service "billing" { policy = "write" }',
  'key_prefix "billing/" { policy = "write" }',
  'key_prefix "shared/" { policy = "read" }',
  'node_prefix "" { policy = "read" }',
  'session_prefix "" { policy = "write" }',
  'event_prefix "deploy-" { policy = "write" }',
  'query_prefix "" { policy = "read" }',
].join('\n');

const SIXTEEN = [
  ['service', 'billing', 'write'],
  ['service', 'web', 'read'],
  ['service', 'web', 'write'],
  ['key', 'billing/config', 'write'],
  ['key', 'shared/flags', 'read'],
  ['key', 'shared/flags', 'write'],
  ['key', 'other/x', 'read'],
  ['node', 'node-7', 'read'],
  ['node', 'node-7', 'write'],
  ['session', 'node-7', 'write'],
  ['event', 'deploy-web', 'write'],
  ['query', 'lookup', 'read'],
  ['intention', 'billing', 'read'],
  ['intention', 'billing', 'write'],
  ['operator', undefined, 'read'],
  ['acl', undefined, 'read'],
].map(([Resource, Segment, Access]) => ({ Resource, ...(Segment ? { Segment } : {}), Access }));

/** `dataDir` holds a seeded store whose management token is `secret`; it is not in use. */
export async function authorizeBench(
  dataDir: string,
  secret: string,
  options: { seconds: number; rounds: number; connections: number; flags?: string[]; reportDecisions?: boolean },
): Promise<AuthorizeBench> {
  const { pinned, daemon, bareURL, stop } = await startDaemonAndBaseline(dataDir, options.flags ?? []);
  try {
    const admin = { 'X-Service-Token': secret, 'Content-Type': 'application/json' };
    const put = async (path: string, body: unknown) => {
      const res = await fetch(daemon.url + path, { method: 'PUT', headers: admin, body: JSON.stringify(body) });
      if (!res.ok) throw new Error(`PUT ${path}: ${res.status} ${await res.text()}`);
      return (await res.json()) as { ID: string; SecretID: string };
    };
    const policy = await put('/v1/acl/policy', { Name: 'bench-billing', Rules: RULES });
    const role = await put('/v1/acl/role', { Name: 'bench-billing-role', NodeIdentities: [{ NodeName: 'node-7', Datacenter: 'dc1' }] });
    const token = await put('/v1/acl/token', { Description: 'billing', Policies: [{ ID: policy.ID }], Roles: [{ ID: role.ID }], ServiceIdentities: [{ ServiceName: 'billing' }] });
    const headers = { 'X-Service-Token': token.SecretID, 'Content-Type': 'application/json' };
    const oneBody = JSON.stringify([SIXTEEN[0]]);
    const sixteenBody = JSON.stringify(SIXTEEN);
    const check = await (await fetch(`${daemon.url}/v1/internal/acl/authorize`, { method: 'POST', headers, body: sixteenBody })).json();
    process.stdout.write(`authorize, 16 checks: ${(check as Array<{ Allow: boolean }>).map((a) => (a.Allow ? 'allow' : 'deny')).join(' ')}\n`);
    if (pinned) pinSelf('0');
    const enforcing = await enforcingBench(daemon.url, token.SecretID, (check as Array<{ Allow: boolean }>).map((a) => a.Allow), options.reportDecisions ?? true);
    const run = async (opts: autocannon.Options, seconds: number) => {
      const r = await autocannon({ connections: options.connections, duration: seconds, ...opts });
      if (r.non2xx > 0 || r.errors > 0) throw new Error(`${opts.url}: ${r.non2xx} non-2xx answers, ${r.errors} errors`);
      return { reqPerSec: Math.round(r.requests.average), p99ms: r.latency.p99 };
    };
    const bare = { url: bareURL };
    const one = { url: `${daemon.url}/v1/internal/acl/authorize`, method: 'POST' as const, headers, body: oneBody };
    const sixteen = { ...one, body: sixteenBody };
    for (const o of [bare, one, sixteen]) await run(o, 2);
    const rounds = Math.max(3, options.rounds);
    const results = { bare: [] as Array<{ reqPerSec: number; p99ms: number }>, one: [] as Array<{ reqPerSec: number; p99ms: number }>, sixteen: [] as Array<{ reqPerSec: number; p99ms: number }> };
    for (let i = 0; i < rounds; i++) {
      results.bare.push(await run(bare, options.seconds));
      results.one.push(await run(one, options.seconds));
      results.sixteen.push(await run(sixteen, options.seconds));
    }
    const med = (xs: Array<{ reqPerSec: number; p99ms: number }>) => ({ reqPerSec: medianOf(xs.map((x) => x.reqPerSec)), p99ms: medianOf(xs.map((x) => x.p99ms)) });
    return { bare: med(results.bare), one: med(results.one), sixteen: med(results.sixteen), enforcing, pinned, rounds };
  } finally {
    if (pinned) unpinSelf();
    await stop();
  }
}

/**
 * The enforcing client (docs/enforcing-client.md, "Enforcing policies in your service"): one cached token, the sixteen checks in turn, 1,000,000
 * allowed() calls per round on this one core; its answers must equal the daemon's.
 */
async function enforcingBench(url: string, secret: string, expected: boolean[], reportDecisions: boolean): Promise<AuthorizeBench['enforcing']> {
  // The token being judged opens the watch too: the bench's tokens hold global-management (acl:read among it).
  const authz = new Authorizer({ client: { address: url }, token: secret, reportDecisions });
  try {
    const checks = SIXTEEN.map((c) => [c.Resource as string, (c.Segment as string | undefined) ?? '', c.Access as Access] as const);
    for (let i = 0; i < checks.length; i++) {
      const [r, s, a] = checks[i] as (typeof checks)[number];
      if ((await authz.allowed(secret, r, s, a)) !== expected[i]) throw new Error(`enforcing client: check ${i} answered unlike the daemon`);
    }
    const calls = 1_000_000;
    const roundsMs: number[] = [];
    let allowed = 0;
    for (let round = 0; round < 4; round++) {
      const started = performance.now();
      for (let i = 0; i < calls; i++) {
        const [r, s, a] = checks[i & 15] as (typeof checks)[number];
        if (authz.allowed(secret, r, s, a) === true) allowed++;
      }
      // The first round warms the code up; it is not counted.
      if (round > 0) roundsMs.push(Math.round(performance.now() - started));
    }
    if (allowed === 0) throw new Error('enforcing client: nothing allowed');
    const medianMs = medianOf(roundsMs);
    process.stdout.write(`enforcing client: 1,000,000 allowed() calls on a cached token in ${medianMs} ms (median of ${roundsMs.join(', ')}; target < 1000 ms)\n`);
    return { calls, medianMs, roundsMs };
  } finally {
    authz.close();
  }
}
