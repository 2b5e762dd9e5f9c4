import { type KeyObject, constants, createPublicKey, verify } from 'node:crypto';

/**
 * A JWS in compact form (RFC 7515) checked against public keys with node's crypto, in the
 * caller's turn: no worker-pool hop and no promise per login, which is what WebCrypto (jose's
 * verification) costs on every login (docs/http-api.md, "Auth methods and login"). It checks what jose checks:
 * exactly three base64url parts, a JSON object header naming an allowed algorithm, no
 * critical extension (`crit`, `b64`), a key of the algorithm's type (RSA of at least 2048
 * bits, the algorithm's curve) whose signature verifies. Anything else is a JwsError.
 */

export type JwsAlgorithm = 'RS256' | 'RS384' | 'RS512' | 'ES256' | 'ES384' | 'ES512' | 'PS256' | 'PS384' | 'PS512' | 'EdDSA';

export const JWS_ALGORITHMS: readonly JwsAlgorithm[] = [
  'RS256',
  'RS384',
  'RS512',
  'ES256',
  'ES384',
  'ES512',
  'PS256',
  'PS384',
  'PS512',
  'EdDSA',
];

/** Why a JWS was refused: its form, its algorithm, no key of the set for it, or a signature no key verifies. */
export class JwsError extends Error {
  constructor(
    readonly reason: 'malformed' | 'algorithm' | 'no-key' | 'signature',
    message: string,
  ) {
    super(message);
  }
}

interface AlgorithmSpec {
  hash: string | null;
  /** The key types it takes (KeyObject.asymmetricKeyType). */
  types: readonly string[];
  /** The curve an EC key must be on (asymmetricKeyDetails.namedCurve). */
  curve?: string;
  pss?: boolean;
}

const SPECS: Record<JwsAlgorithm, AlgorithmSpec> = {
  RS256: { hash: 'sha256', types: ['rsa'] },
  RS384: { hash: 'sha384', types: ['rsa'] },
  RS512: { hash: 'sha512', types: ['rsa'] },
  PS256: { hash: 'sha256', types: ['rsa', 'rsa-pss'], pss: true },
  PS384: { hash: 'sha384', types: ['rsa', 'rsa-pss'], pss: true },
  PS512: { hash: 'sha512', types: ['rsa', 'rsa-pss'], pss: true },
  ES256: { hash: 'sha256', types: ['ec'], curve: 'prime256v1' },
  ES384: { hash: 'sha384', types: ['ec'], curve: 'secp384r1' },
  ES512: { hash: 'sha512', types: ['ec'], curve: 'secp521r1' },
  EdDSA: { hash: null, types: ['ed25519', 'ed448'] },
};

const BASE64URL = /^[A-Za-z0-9_-]*$/;

/** The JWK key type (kty) and curve (crv) an algorithm's keys have: a key set's keys are picked by them. */
function jwkShape(alg: JwsAlgorithm): { kty: string; crv?: string[] } {
  if (alg.startsWith('RS') || alg.startsWith('PS')) return { kty: 'RSA' };
  if (alg === 'ES256') return { kty: 'EC', crv: ['P-256'] };
  if (alg === 'ES384') return { kty: 'EC', crv: ['P-384'] };
  if (alg === 'ES512') return { kty: 'EC', crv: ['P-521'] };
  return { kty: 'OKP', crv: ['Ed25519', 'Ed448'] };
}

/** Whether `key` may verify `alg` (the checks jose makes of a key before it uses it). */
export function keyFits(key: KeyObject, alg: JwsAlgorithm): boolean {
  const spec = SPECS[alg];
  const type = key.asymmetricKeyType;
  if (key.type !== 'public' || type === undefined || !spec.types.includes(type)) return false;
  const details = key.asymmetricKeyDetails ?? {};
  if (spec.curve !== undefined && details.namedCurve !== spec.curve) return false;
  if (type.startsWith('rsa') && (details.modulusLength ?? 0) < 2048) return false;
  return true;
}

/** A public key of a JWKS, with what selects it for a JWS (RFC 7517). */
export interface SetKey {
  key: KeyObject;
  jwk: { kty?: unknown; kid?: unknown; alg?: unknown; use?: unknown; key_ops?: unknown; crv?: unknown };
}

/**
 * A JWKS's public keys (those node can read: the others, a symmetric key say, are left out, as
 * no JWS may be verified with them). A set whose `keys` is not a list of objects is refused
 * whole, as jose refuses it.
 */
export function setKeys(set: { keys?: unknown }): SetKey[] {
  const out: SetKey[] = [];
  if (!Array.isArray(set.keys) || !set.keys.every((k) => k !== null && typeof k === 'object' && !Array.isArray(k)))
    throw new Error('the JSON Web Key Set is malformed (its keys are not a list of objects)');
  for (const jwk of set.keys) {
    try {
      const key = createPublicKey({ key: jwk as import('node:crypto').JsonWebKey, format: 'jwk' });
      if (key.type === 'public') out.push({ key, jwk: jwk as SetKey['jwk'] });
    } catch {
      // Not a public key node can read.
    }
  }
  return out;
}

/** The keys of a set a JWS with this header may be verified with, as jose picks them (kid, kty, alg, use, key_ops, crv). */
function candidates(set: readonly SetKey[], alg: JwsAlgorithm, kid: unknown): KeyObject[] {
  const { kty, crv } = jwkShape(alg);
  return set
    .filter(({ jwk }) => {
      if (jwk.kty !== kty) return false;
      if (typeof kid === 'string' && jwk.kid !== kid) return false;
      if (typeof jwk.alg === 'string' && jwk.alg !== alg) return false;
      if (typeof jwk.use === 'string' && jwk.use !== 'sig') return false;
      if (Array.isArray(jwk.key_ops) && !jwk.key_ops.includes('verify')) return false;
      if (crv !== undefined && !crv.includes(String(jwk.crv))) return false;
      return true;
    })
    .map(({ key }) => key);
}

function decodePart(part: string, what: string): Buffer {
  if (!BASE64URL.test(part)) throw new JwsError('malformed', `its ${what} is not base64url`);
  return Buffer.from(part, 'base64url');
}

/** A compact JWS's header, checked for form (not its signature). */
export function jwsHeader(jws: string): { alg?: unknown; kid?: unknown; crit?: unknown; b64?: unknown } {
  const parts = jws.split('.');
  if (parts.length !== 3) throw new JwsError('malformed', 'it is not a compact JWS (three parts separated by dots)');
  let header: unknown;
  try {
    header = JSON.parse(decodePart(parts[0] as string, 'header').toString('utf8'));
  } catch (err) {
    if (err instanceof JwsError) throw err;
    throw new JwsError('malformed', 'its header is not JSON');
  }
  if (header === null || typeof header !== 'object' || Array.isArray(header))
    throw new JwsError('malformed', 'its header is not a JSON object');
  return header as { alg?: unknown; kid?: unknown };
}

/**
 * Verifies a compact JWS with the first of `keys` that fits its algorithm and whose
 * signature verifies (static keys), or with the keys of a JWKS it may name (`set`); returns
 * its payload's bytes.
 */
export function verifyCompact(
  jws: string,
  algorithms: readonly string[],
  keys: { list: readonly KeyObject[] } | { set: readonly SetKey[] },
): Buffer {
  const header = jwsHeader(jws);
  const alg = header.alg;
  if (typeof alg !== 'string' || !algorithms.includes(alg) || !(alg in SPECS))
    throw new JwsError('algorithm', 'unsupported signing algorithm');
  // No extension is understood here; RFC 7515 says a JWS naming one it needs must be refused.
  if (header.crit !== undefined) throw new JwsError('malformed', 'it names critical header parameters this server does not support');
  if (header.b64 !== undefined) throw new JwsError('malformed', 'it uses the unencoded payload option');
  const [protectedPart, payloadPart, signaturePart] = jws.split('.') as [string, string, string];
  const payload = decodePart(payloadPart, 'payload');
  const signature = decodePart(signaturePart, 'signature');
  const algorithm = alg as JwsAlgorithm;
  const spec = SPECS[algorithm];
  const fitting =
    'list' in keys
      ? keys.list.filter((k) => keyFits(k, algorithm))
      : candidates(keys.set, algorithm, header.kid).filter((k) => keyFits(k, algorithm));
  if (fitting.length === 0) throw new JwsError('no-key', 'no key of the method fits the signing algorithm');
  const signed = Buffer.from(`${protectedPart}.${payloadPart}`, 'ascii');
  for (const key of fitting) {
    const options = spec.pss
      ? { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_DIGEST }
      : spec.curve !== undefined
        ? { key, dsaEncoding: 'ieee-p1363' as const }
        : { key };
    let ok = false;
    try {
      ok = verify(spec.hash, signed, options, signature);
    } catch {
      ok = false;
    }
    if (ok) return payload;
  }
  throw new JwsError('signature', 'failed to verify the signature');
}
