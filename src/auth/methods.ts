import { invalid } from '../domain/errors.js';
import type { AuthMethodRecord } from '../domain/types.js';
import { METHOD_TYPES } from './fields.js';
import { type Identity, LoginRefused } from './identity.js';
import { type JwtConfig, JwtVerifier, validateJwtConfig } from './jwt.js';
import { type KubernetesConfig, reviewKubernetesToken, validateKubernetesConfig } from './kubernetes.js';

export { LoginRefused, type Identity };


/** Checks a method's Config for its type. */
export function validateMethodConfig(type: string, config: Record<string, unknown>): void {
  if (type === 'jwt') validateJwtConfig(config);
  else if (type === 'kubernetes') validateKubernetesConfig(config);
  else throw invalid(`Invalid Auth Method: Type should be one of: ${METHOD_TYPES.join(', ')}`);
}

/** Verifiers by method version: JWKS caches live as long as the method's Config does. */
const verifiers = new WeakMap<AuthMethodRecord, JwtVerifier>();

/** Verifies a bearer token with the method; throws LoginRefused with the reason. */
export async function verifyBearer(method: AuthMethodRecord, bearer: string, now: number): Promise<Identity> {
  if (bearer === '') throw new LoginRefused('no bearer token given');
  if (method.Type === 'kubernetes') return reviewKubernetesToken(method.Config as unknown as KubernetesConfig, bearer);
  if (method.Type !== 'jwt') throw new LoginRefused(`auth method type ${JSON.stringify(method.Type)} is not supported`);
  let v = verifiers.get(method);
  if (!v) verifiers.set(method, (v = new JwtVerifier(method.Config as JwtConfig)));
  return v.verify(bearer, now);
}
