import { invalid } from '../domain/errors.js';
import { canonicalConfig } from './fields.js';
import { redactURL, requestJSON } from './http.js';
import { type URLPolicy, urlProblem } from './url-policy.js';
import { type Identity, LoginRefused } from './identity.js';

/** A kubernetes method's Config, as Consul's. */
export interface KubernetesConfig {
  /** The API server, https://host:port. */
  Host: string;
  /** PEM CA of the API server (https). */
  CACert?: string;
  /** A service account JWT allowed to create TokenReviews. */
  ServiceAccountJWT: string;
}

const KNOWN = ['Host', 'CACert', 'ServiceAccountJWT', 'MapNamespaces', 'ConsulNamespacePrefix', 'ConsulNamespaceOverrides'] as const;
const bad = (message: string) => invalid(`Invalid Auth Method: ${message}`);

/** Checks a kubernetes method's Config as Consul does; returns it with its keys spelled canonically. */
export function validateKubernetesConfig(sent: Record<string, unknown>, policy: URLPolicy = { allowedHosts: [] }): KubernetesConfig {
  const config = canonicalConfig(sent, KNOWN, 'kubernetes', bad);
  const host = config.Host;
  if (typeof host !== 'string' || host === '') throw bad('Host is required');
  const problem = urlProblem(host, policy, { hostOnly: true });
  if (problem) throw bad(`Host ${problem} (such as https://kubernetes.default.svc:443)`);
  const url = new URL(host);
  if (
    config.CACert !== undefined &&
    config.CACert !== '' &&
    (typeof config.CACert !== 'string' || !config.CACert.includes('-----BEGIN CERTIFICATE-----'))
  )
    throw bad('CACert must be a PEM-encoded certificate');
  if (url.protocol === 'https:' && !config.CACert) throw bad('CACert is required for an https Host');
  if (typeof config.ServiceAccountJWT !== 'string' || config.ServiceAccountJWT === '') throw bad('ServiceAccountJWT is required');
  if (config.ServiceAccountJWT.split('.').length !== 3) throw bad('ServiceAccountJWT is not a JWT');
  return config as unknown as KubernetesConfig;
}

/** Asks the cluster's TokenReview API about a service account token. */
export async function reviewKubernetesToken(
  config: KubernetesConfig,
  bearer: string,
  policy: URLPolicy = { allowedHosts: [] },
): Promise<Identity> {
  // Checked again at use: a method written before the allow-list (or a stricter build) is held to it too.
  const problem = urlProblem(config.Host, policy, { hostOnly: true });
  if (problem) throw new LoginRefused(`cannot verify the bearer token: the auth method's Host ${problem}`);
  // A quick shape check: no round trip for something that is not a JWT at all.
  if (bearer.split('.').length !== 3) throw new LoginRefused('the bearer token is not a service account JWT');
  let res: { status: number; body: unknown };
  try {
    res = await requestJSON(`${new URL(config.Host).origin}/apis/authentication.k8s.io/v1/tokenreviews`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${config.ServiceAccountJWT}` },
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token: bearer } },
      ...(config.CACert ? { ca: config.CACert } : {}),
    });
  } catch (err) {
    throw new LoginRefused(
      `cannot verify the bearer token: the TokenReview at ${redactURL(config.Host)} failed: ${(err as Error).message}`,
    );
  }
  if (res.status !== 200 && res.status !== 201)
    throw new LoginRefused(`cannot verify the bearer token: the kubernetes API answered the TokenReview with HTTP ${res.status}`);
  const status = (res.body as { status?: { authenticated?: boolean; user?: { username?: string; uid?: string } } } | undefined)?.status;
  // What the API says of a refused token is not repeated: it is the remote end's text.
  if (!status?.authenticated) throw new LoginRefused('the service account token was not accepted by the TokenReview');
  const parts = (status.user?.username ?? '').split(':');
  if (parts.length !== 4 || parts[0] !== 'system' || parts[1] !== 'serviceaccount')
    throw new LoginRefused('the reviewed token does not belong to a service account');
  const serviceaccount = { namespace: parts[2] as string, name: parts[3] as string, uid: status.user?.uid ?? '' };
  return {
    selectable: { serviceaccount },
    variables: {
      'serviceaccount.name': serviceaccount.name,
      'serviceaccount.namespace': serviceaccount.namespace,
      'serviceaccount.uid': serviceaccount.uid,
    },
  };
}
