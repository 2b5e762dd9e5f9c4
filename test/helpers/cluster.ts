import type { WatchwordClient } from '../../src/client/index.js';
import type { DatacenterHandle } from '../../src/testing/index.js';
import { jsonCall } from '../../src/testing/http.js';

/** Every global object of a datacenter as id -> Hash, across all namespaces. */
export async function globalState(client: WatchwordClient): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const p of (await client.policies.list({ namespace: '*' })).value) out[`policy:${p.ID}`] = p.Hash;
  for (const r of (await client.roles.list({}, { namespace: '*' })).value) out[`role:${r.ID}`] = r.Hash;
  for (const t of (await client.tokens.list({}, { namespace: '*' })).value) if (!t.Local) out[`token:${t.AccessorID}`] = t.Hash;
  return out;
}

export async function localTokens(client: WatchwordClient): Promise<string[]> {
  return (await client.tokens.list({}, { namespace: '*' })).value
    .filter((t) => t.Local)
    .map((t) => t.AccessorID)
    .sort();
}

/** One HTTP call to one server of a cluster, with a token; JSON body and answer, bounded in time. */
export async function serverCall(server: DatacenterHandle, token: string, method: string, path: string, body?: unknown, timeoutMs = 8000) {
  const res = await jsonCall(server.url, { 'X-Service-Token': token }, method, path, body, timeoutMs);
  return { ...res, body: res.body as Record<string, unknown> | undefined };
}
