import { type KeyObject, createPublicKey } from 'node:crypto';
import type { JSONWebKeySet } from 'jose';
import { invalid } from '../domain/errors.js';
import { canonicalConfig } from './fields.js';
import { parseDuration } from '../domain/duration.js';
import { redactURL, requestJSON } from './http.js';
import { KeySetCache } from './key-set.js';
import { type URLPolicy, urlProblem } from './url-policy.js';
import { type Identity, LoginRefused } from './identity.js';
import { JWS_ALGORITHMS, JwsError, type SetKey, jwsHeader, setKeys, verifyCompact } from './jws.js';

/** A jwt method's Config, as Consul's. */
export interface JwtConfig {
  JWTValidationPubKeys?: string[];
  JWKSURL?: string;
  JWKSCACert?: string;
  OIDCDiscoveryURL?: string;
  OIDCDiscoveryCACert?: string;
  BoundIssuer?: string;
  BoundAudiences?: string[];
  ClaimMappings?: Record<string, string>;
  ListClaimMappings?: Record<string, string>;
  JWTSupportedAlgs?: string[];
  ExpirationLeeway?: string | number;
  NotBeforeLeeway?: string | number;
  ClockSkewLeeway?: string | number;
}

const ALGORITHMS: readonly string[] = JWS_ALGORITHMS;
const KNOWN_KEYS = [
  'JWTValidationPubKeys',
  'JWKSURL',
  'JWKSCACert',
  'OIDCDiscoveryURL',
  'OIDCDiscoveryCACert',
  'BoundIssuer',
  'BoundAudiences',
  'ClaimMappings',
  'ListClaimMappings',
  'JWTSupportedAlgs',
  'ExpirationLeeway',
  'NotBeforeLeeway',
  'ClockSkewLeeway',
] as const;

const bad = (message: string) => invalid(`Invalid Auth Method: ${message}`);

function stringMap(v: unknown, field: string): Record<string, string> | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v) || !Object.values(v).every((x) => typeof x === 'string' && x !== ''))
    throw bad(`${field} must map claim names to attribute names`);
  return v as Record<string, string>;
}

function stringList(v: unknown, field: string): string[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw bad(`${field} must be a list of strings`);
  return v as string[];
}

function httpURL(v: unknown, field: string, policy: URLPolicy): string | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  const problem = typeof v === 'string' ? urlProblem(v, policy) : 'is not a URL';
  if (problem) throw bad(`${field} ${problem}`);
  return v as string;
}

/** A leeway in ms: Consul's default when 0 or absent, none when negative. */
function leeway(v: unknown, field: string, fallbackMs: number): number {
  if (v === undefined || v === null || v === '' || v === 0) return fallbackMs;
  const ms = typeof v === 'number' ? v / 1e6 : parseDuration(String(v));
  if (ms === undefined || !Number.isFinite(ms)) throw bad(`${field} is not a duration`);
  if (ms < 0) return 0;
  return ms === 0 ? fallbackMs : ms;
}

/** Checks a jwt method's Config as Consul does; returns it with its keys spelled canonically. */
export function validateJwtConfig(sent: Record<string, unknown>, policy: URLPolicy = { allowedHosts: [] }): JwtConfig {
  const config = canonicalConfig(sent, KNOWN_KEYS, 'jwt', bad);
  const keys = stringList(config.JWTValidationPubKeys, 'JWTValidationPubKeys') ?? [];
  const jwks = httpURL(config.JWKSURL, 'JWKSURL', policy);
  const discovery = httpURL(config.OIDCDiscoveryURL, 'OIDCDiscoveryURL', policy);
  const sources = [keys.length > 0, jwks !== undefined, discovery !== undefined].filter(Boolean).length;
  if (sources !== 1) throw bad("exactly one of 'JWTValidationPubKeys', 'JWKSURL', or 'OIDCDiscoveryURL' must be set");
  keys.forEach((pem, i) => {
    try {
      createPublicKey(pem);
    } catch {
      throw bad(`JWTValidationPubKeys[${i}] is not a PEM-encoded public key`);
    }
  });
  for (const f of ['JWKSCACert', 'OIDCDiscoveryCACert'] as const) {
    const v = config[f];
    if (v !== undefined && v !== '' && (typeof v !== 'string' || !v.includes('-----BEGIN CERTIFICATE-----')))
      throw bad(`${f} must be a PEM-encoded certificate`);
  }
  if (config.JWKSCACert && !jwks) throw bad("JWKSCACert is set but 'JWKSURL' is not");
  if (config.OIDCDiscoveryCACert && !discovery) throw bad("OIDCDiscoveryCACert is set but 'OIDCDiscoveryURL' is not");
  const algs = stringList(config.JWTSupportedAlgs, 'JWTSupportedAlgs');
  for (const a of algs ?? [])
    if (!ALGORITHMS.includes(a))
      throw bad(`JWTSupportedAlgs: unsupported algorithm ${JSON.stringify(a)} (supported: ${ALGORITHMS.join(', ')})`);
  const claims = stringMap(config.ClaimMappings, 'ClaimMappings');
  const lists = stringMap(config.ListClaimMappings, 'ListClaimMappings');
  const names = [...Object.values(claims ?? {}), ...Object.values(lists ?? {})];
  const dup = names.find((n, i) => names.indexOf(n) !== i);
  if (dup) throw bad(`ClaimMappings and ListClaimMappings both map to ${JSON.stringify(dup)}`);
  if (config.BoundIssuer !== undefined && typeof config.BoundIssuer !== 'string') throw bad('BoundIssuer must be a string');
  stringList(config.BoundAudiences, 'BoundAudiences');
  leeway(config.ExpirationLeeway, 'ExpirationLeeway', 0);
  leeway(config.NotBeforeLeeway, 'NotBeforeLeeway', 0);
  leeway(config.ClockSkewLeeway, 'ClockSkewLeeway', 0);
  return config as JwtConfig;
}

/** A claim by name, or by JSON pointer (`/a/b`) into nested claims. */
function claim(payload: Record<string, unknown>, name: string): unknown {
  if (!name.startsWith('/')) return payload[name];
  let v: unknown = payload;
  for (const part of name
    .slice(1)
    .split('/')
    .map((p) => p.replaceAll('~1', '/').replaceAll('~0', '~'))) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<string, unknown>)[part];
  }
  return v;
}

const scalar = (v: unknown): string | undefined =>
  typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : undefined;

/** The JWKS at `url`; failures say which step failed, never what the server said. */
async function fetchJWKS(url: string, ca: string | undefined, step = 'fetching the JWKS'): Promise<JSONWebKeySet> {
  let res: { status: number; body: unknown };
  try {
    res = await requestJSON(url, ca ? { ca } : {});
  } catch (err) {
    throw new LoginRefused(`cannot verify the bearer token: ${step} from ${redactURL(url)} failed: ${(err as Error).message}`);
  }
  const body = res.body as { keys?: unknown } | undefined;
  if (res.status !== 200 || !body || !Array.isArray(body.keys))
    throw new LoginRefused(
      `cannot verify the bearer token: ${step} from ${redactURL(url)} failed: it answered HTTP ${res.status} without a key set`,
    );
  return body as JSONWebKeySet;
}

/** Verifies bearer tokens for one jwt method's Config. */
export class JwtVerifier {
  private readonly staticKeys: KeyObject[];
  private readonly remote: KeySetCache<SetKey[]> | undefined;

  constructor(
    private readonly config: JwtConfig,
    policy: URLPolicy = { allowedHosts: [] },
  ) {
    this.staticKeys = (config.JWTValidationPubKeys ?? []).map((pem) => createPublicKey(pem));
    if (config.JWKSURL) {
      const url = config.JWKSURL;
      this.remote = new KeySetCache(() => fetchJWKS(url, config.JWKSCACert || undefined), setKeys);
    } else if (config.OIDCDiscoveryURL) {
      const issuer = config.OIDCDiscoveryURL.replace(/\/$/, '');
      const ca = config.OIDCDiscoveryCACert || undefined;
      const shown = redactURL(issuer);
      this.remote = new KeySetCache(async () => {
        let res: { status: number; body: unknown };
        try {
          res = await requestJSON(`${issuer}/.well-known/openid-configuration`, ca ? { ca } : {});
        } catch (err) {
          throw new LoginRefused(
            `cannot verify the bearer token: fetching the OIDC discovery document of ${shown} failed: ${(err as Error).message}`,
          );
        }
        const doc = res.body as { issuer?: unknown; jwks_uri?: unknown } | undefined;
        if (res.status !== 200 || !doc || typeof doc.jwks_uri !== 'string') {
          throw new LoginRefused(
            `cannot verify the bearer token: fetching the OIDC discovery document of ${shown} failed: it answered HTTP ${res.status} ` +
              `without jwks_uri`,
          );
        }
        if (typeof doc.issuer !== 'string' || doc.issuer.replace(/\/$/, '') !== issuer) {
          throw new LoginRefused(`cannot verify the bearer token: the OIDC discovery document of ${shown} names another issuer`);
        }
        // The provider names where its keys are: that URL obeys the same rules as the method's own.
        const problem = urlProblem(doc.jwks_uri, policy);
        if (problem)
          throw new LoginRefused(`cannot verify the bearer token: the jwks_uri of the OIDC discovery document of ${shown} ${problem}`);
        return fetchJWKS(doc.jwks_uri, ca, 'fetching the JWKS named by the OIDC discovery document');
      }, setKeys);
    }
  }

  async verify(bearer: string, now: number): Promise<Identity> {
    const algorithms = this.config.JWTSupportedAlgs && this.config.JWTSupportedAlgs.length > 0 ? this.config.JWTSupportedAlgs : ['RS256'];
    let payload: Record<string, unknown>;
    try {
      const { alg } = jwsHeader(bearer);
      if (typeof alg !== 'string' || !algorithms.includes(alg))
        throw new LoginRefused(
          `unsupported signing algorithm ${JSON.stringify(typeof alg === 'string' ? alg : '')}; the method accepts ${algorithms.join(', ')}`,
        );
      const bytes = this.remote ? await this.checkRemote(bearer, algorithms) : verifyCompact(bearer, algorithms, { list: this.staticKeys });
      payload = JSON.parse(bytes.toString('utf8')) as Record<string, unknown>;
    } catch (err) {
      if (err instanceof LoginRefused) throw err;
      if (err instanceof JwsError && (err.reason === 'signature' || err.reason === 'no-key'))
        throw new LoginRefused('failed to verify the signature of the bearer token');
      if (err instanceof JwsError && err.reason === 'algorithm') throw new LoginRefused('unsupported signing algorithm');
      throw new LoginRefused(`the bearer token is not a valid JWT (${(err as Error).message})`);
    }
    if (payload === null || typeof payload !== 'object') throw new LoginRefused('the bearer token has no claims');
    this.checkClaims(payload, now);
    const value: Record<string, string> = {};
    for (const [from, to] of Object.entries(this.config.ClaimMappings ?? {})) value[to] = scalar(claim(payload, from)) ?? '';
    const list: Record<string, string[]> = {};
    for (const [from, to] of Object.entries(this.config.ListClaimMappings ?? {})) {
      const v = claim(payload, from);
      list[to] = Array.isArray(v)
        ? v.map(scalar).filter((x): x is string => x !== undefined)
        : scalar(v) !== undefined
          ? [scalar(v) as string]
          : [];
    }
    return { selectable: { value, list }, variables: { ...Object.fromEntries(Object.entries(value).map(([k, v]) => [`value.${k}`, v])) } };
  }

  /** The payload of a JWS signed by a key of the method's key set, fetched again once when it names none held (a key rotated in). */
  private async checkRemote(bearer: string, algorithms: string[]): Promise<Buffer> {
    const remote = this.remote as KeySetCache<SetKey[]>;
    try {
      return verifyCompact(bearer, algorithms, { set: await remote.get(false) });
    } catch (err) {
      if (!(err instanceof JwsError && err.reason === 'no-key')) throw err;
      return verifyCompact(bearer, algorithms, { set: await remote.get(true) });
    }
  }

  private checkClaims(payload: Record<string, unknown>, now: number): void {
    const c = this.config;
    const skew = leeway(c.ClockSkewLeeway, 'ClockSkewLeeway', 60_000);
    const expLeeway = leeway(c.ExpirationLeeway, 'ExpirationLeeway', 150_000);
    const nbfLeeway = leeway(c.NotBeforeLeeway, 'NotBeforeLeeway', 150_000);
    const seconds = (v: unknown, name: string): number | undefined => {
      if (v === undefined) return undefined;
      if (typeof v !== 'number' || !Number.isFinite(v)) throw new LoginRefused(`the bearer token's ${name} claim is not a number`);
      return v * 1000;
    };
    const exp = seconds(payload.exp, 'exp');
    const nbf = seconds(payload.nbf, 'nbf');
    const iat = seconds(payload.iat, 'iat');
    // As Consul's cap library: a token with no time claim at all would be good forever.
    if (exp === undefined && nbf === undefined && iat === undefined)
      throw new LoginRefused('the bearer token carries none of the exp, iat and nbf claims');
    if (exp !== undefined && now > exp + expLeeway + skew) throw new LoginRefused('the bearer token is expired');
    if (nbf !== undefined && now < nbf - nbfLeeway - skew) throw new LoginRefused('the bearer token is not yet valid');
    if (nbf === undefined && iat !== undefined && now < iat - nbfLeeway - skew)
      throw new LoginRefused('the bearer token is not yet valid (issued in the future)');
    if (c.BoundIssuer && payload.iss !== c.BoundIssuer)
      throw new LoginRefused(`the bearer token's issuer ${JSON.stringify(scalar(payload.iss) ?? '')} is not the bound issuer`);
    const audiences = c.BoundAudiences ?? [];
    if (audiences.length > 0) {
      const aud = Array.isArray(payload.aud) ? payload.aud : payload.aud === undefined ? [] : [payload.aud];
      if (!aud.some((a) => typeof a === 'string' && audiences.includes(a)))
        throw new LoginRefused('the bearer token is not meant for any of the bound audiences');
    }
  }
}
