import { isIP } from 'node:net';

/**
 * Where an auth method may send a request (docs/security.md, "Security"): an auth method is written by an
 * operator but its URLs are fetched by the daemon on behalf of anonymous callers, so a URL
 * must be `https://` (plain `http://` only to this machine, for tests), carry no
 * credentials, and when the operator keeps an allow-list (`auth_method_allowed_hosts`),
 * name a host on it. A Kubernetes `Host` is `scheme://host[:port]` and nothing more.
 */
export interface URLPolicy {
  /** Hosts (`name` or `name:port`) auth methods may reach; empty: any. */
  allowedHosts: readonly string[];
}

export const isLoopbackHost = (host: string): boolean => {
  const h = host.replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || (isIP(h) === 4 && h.startsWith('127.'));
};

/** Why `value` may not be fetched (undefined when it may). */
export function urlProblem(value: string, policy: URLPolicy, options: { hostOnly?: boolean } = {}): string | undefined {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    return 'is not a URL';
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') return 'must be an https:// URL';
  if (u.protocol === 'http:' && !isLoopbackHost(u.hostname))
    return 'must be an https:// URL (plain http:// is allowed only for this machine)';
  if (u.username !== '' || u.password !== '') return 'must not carry credentials (user name or password)';
  if (options.hostOnly && ((u.pathname !== '/' && u.pathname !== '') || u.search !== '' || u.hash !== '' || /[?#]/.test(value))) {
    return 'must be scheme://host[:port], with no path, query or fragment';
  }
  if (policy.allowedHosts.length > 0) {
    const host = u.hostname.replace(/^\[|\]$/g, '').toLowerCase();
    const withPort = `${host}:${u.port || (u.protocol === 'https:' ? '443' : '80')}`;
    const allowed = policy.allowedHosts.some((a) => {
      const x = a.toLowerCase().replace(/^\[|\]/g, '');
      return x === host || x === withPort;
    });
    if (!allowed) return `names host ${host}, which is not in auth_method_allowed_hosts`;
  }
  return undefined;
}
