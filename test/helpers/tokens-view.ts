import type { TokenRecord } from '../../src/domain/types.js';
import type { LevelStore } from '../../src/store/level-store.js';
import { tokenRecord } from './records.js';

export const everywhere = { partition: 'default', namespaces: ['default'] };

/** Everything a store's reader answers of `tokens`: each by ID and by secret, the filters, the expiry order. */
export function tokensView(store: LevelStore, tokens: TokenRecord[]) {
  const r = store.reader;
  return {
    byID: tokens.map((t) => r.getToken(t.AccessorID) ?? null),
    bySecret: tokens.map((t) => r.getTokenBySecret(t.SecretID)?.AccessorID ?? null),
    all: r.listTokens(everywhere).map((t) => t.AccessorID),
    policy: r.listTokens({ ...everywhere, policy: 'p1' }).map((t) => t.AccessorID),
    role: r.listTokens({ ...everywhere, role: 'r1' }).map((t) => t.AccessorID),
    service: r.listTokens({ ...everywhere, serviceName: 'web' }).map((t) => t.AccessorID),
    local: r.listTokens({ ...everywhere, localOnly: true }).map((t) => t.AccessorID),
    expiring: r.expiredTokens(Date.parse('2100-01-01T00:00:00Z'), 1000).map((e) => e[1]),
  };
}

/** `n` tokens with every kind of field the indexes read (policy p1, role r1, service web, Local, expiry, a chosen secret). */
export function mixedTokens(n: number, description: (i: number) => string = (i) => `token ${i}`): TokenRecord[] {
  return Array.from({ length: n }, (_, i) =>
    tokenRecord({
      Description: description(i),
      Policies: i % 3 === 0 ? [{ ID: 'p1' }] : [],
      Roles: i % 4 === 1 ? [{ ID: 'r1' }] : [],
      ServiceIdentities: i % 5 === 0 ? [{ ServiceName: 'web' }] : [],
      Local: i % 7 === 0,
      ...(i % 4 === 0 ? { ExpirationTime: new Date(Date.parse('2099-01-01T00:00:00Z') + i * 1000).toISOString() } : {}),
      ...(i === 0 ? { SecretID: 'an-operator-chosen-secret' } : {}),
    }),
  );
}

/** Writes `tokens` to `store`, 50 a transaction. */
export async function writeTokens(store: LevelStore, tokens: TokenRecord[]): Promise<void> {
  for (let i = 0; i < tokens.length; i += 50) await store.transact((tx) => tokens.slice(i, i + 50).forEach((t) => tx.put('tokens', t)));
}
