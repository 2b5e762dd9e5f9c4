import type { IncomingHttpHeaders } from 'node:http';

/** Headers a caller's secret may come in, in the order they are read (Consul's, plus ours first). */
export const SECRET_HEADERS = ['x-service-token', 'x-consul-token'] as const;

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  const v = Array.isArray(value) ? value[0] : value;
  return v === undefined || v === '' ? undefined : v;
}

/**
 * The secret a request carries, wherever it arrives (an API request, a replication or server
 * stream upgrade): `?token=` when given, then X-Service-Token, X-Consul-Token, then
 * `Authorization: Bearer`; the first non-empty wins.
 */
export function secretOf(tokenParam: string | undefined, headers: IncomingHttpHeaders): string | undefined {
  if (tokenParam) return tokenParam;
  for (const name of SECRET_HEADERS) {
    const v = header(headers, name);
    if (v) return v;
  }
  const auth = header(headers, 'authorization');
  if (auth) {
    const m = /^Bearer\s+(.+)$/i.exec(auth.trim());
    if (m?.[1]) return m[1].trim();
  }
  return undefined;
}
