import { invalid } from '../domain/errors.js';
import type { AuthMethodRecord } from '../domain/types.js';
import { METHOD_TYPES } from './fields.js';
import { type Identity, LoginRefused } from './identity.js';
import { type JwtConfig, JwtVerifier, validateJwtConfig } from './jwt.js';
import { type KubernetesConfig, reviewKubernetesToken, validateKubernetesConfig } from './kubernetes.js';
import { type URLPolicy, urlProblem } from './url-policy.js';

export { LoginRefused, type Identity };

/** Checks a method's Config for its type, its URLs against `policy`. */
export function validateMethodConfig(type: string, config: Record<string, unknown>, policy: URLPolicy): Record<string, unknown> {
  if (type === 'jwt') return validateJwtConfig(config, policy) as Record<string, unknown>;
  if (type === 'kubernetes') return validateKubernetesConfig(config, policy) as unknown as Record<string, unknown>;
  throw invalid(`Invalid Auth Method: Type should be one of: ${METHOD_TYPES.join(', ')}`);
}

/** Verifiers by method version: JWKS caches live as long as the method's Config does. */
const verifiers = new WeakMap<AuthMethodRecord, JwtVerifier>();

/** Verifies a bearer token with the method; throws LoginRefused with the reason. */
export async function verifyBearer(method: AuthMethodRecord, bearer: string, now: number, policy: URLPolicy): Promise<Identity> {
  if (bearer === '') throw new LoginRefused('no bearer token given');
  if (method.Type === 'kubernetes') return reviewKubernetesToken(method.Config as unknown as KubernetesConfig, bearer, policy);
  if (method.Type !== 'jwt') throw new LoginRefused(`auth method type ${JSON.stringify(method.Type)} is not supported`);
  const config = method.Config as JwtConfig;
  for (const field of ['JWKSURL', 'OIDCDiscoveryURL'] as const) {
    const url = config[field];
    const problem = url ? urlProblem(url, policy) : undefined;
    if (problem) throw new LoginRefused(`cannot verify the bearer token: the auth method's ${field} ${problem}`);
  }
  let v = verifiers.get(method);
  if (!v) verifiers.set(method, (v = new JwtVerifier(config, policy)));
  return v.verify(bearer, now);
}
