import type { WatchwordClient } from '../../src/client/index.js';

/** Every global object of a datacenter as id -> Hash, across all namespaces. */
export async function globalState(client: WatchwordClient): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const p of (await client.policies.list({ namespace: '*' })).value) out[`policy:${p.ID}`] = p.Hash;
  for (const r of (await client.roles.list({}, { namespace: '*' })).value) out[`role:${r.ID}`] = r.Hash;
  for (const t of (await client.tokens.list({}, { namespace: '*' })).value) if (!t.Local) out[`token:${t.AccessorID}`] = t.Hash;
  return out;
}

export async function localTokens(client: WatchwordClient): Promise<string[]> {
  return (await client.tokens.list({}, { namespace: '*' })).value.filter((t) => t.Local).map((t) => t.AccessorID).sort();
}
