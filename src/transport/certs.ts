/**
 * Certificates for a cluster (docs/tls.md, "TLS"), as `consul tls ca create` and `consul tls cert
 * create` make them: a CA, and per server a certificate naming `server.<dc>.<domain>`,
 * `localhost` and 127.0.0.1, good for both ends of a TLS connection. Built on
 * @peculiar/x509 over Node's WebCrypto, loaded on first use (the CLI and test harness need
 * it; the daemon never does).
 */
import { X509Certificate, createPrivateKey, randomBytes, webcrypto } from 'node:crypto';

type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;
type Algorithm = { name: string; namedCurve?: string; hash: string };

/** A certificate and its private key, PEM. */
export interface Issued {
  cert: string;
  key: string;
}

export interface CAOptions {
  domain: string;
  /** Days the CA is valid (Consul's default: 1825). */
  days: number;
}

export interface CertOptions {
  kind: 'server' | 'client';
  datacenter: string;
  domain: string;
  /** Days the certificate is valid (Consul's default: 365). */
  days: number;
  /** DNS names besides the role's own and localhost. */
  dnsNames?: string[];
  /** IP addresses besides 127.0.0.1. */
  ipAddresses?: string[];
}

type X509 = typeof import('@peculiar/x509');

let loaded: Promise<X509> | undefined;

/** The library, with WebCrypto as its provider (it needs a reflect polyfill first). */
function x509(): Promise<X509> {
  loaded ??= (async () => {
    await import('reflect-metadata');
    const lib = await import('@peculiar/x509');
    lib.cryptoProvider.set(webcrypto as never);
    return lib;
  })();
  return loaded;
}

const EC_P256 = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const DAY_MS = 86_400_000;

/** The name a server of `datacenter` carries in its certificate. */
export const serverName = (datacenter: string, domain: string): string => `server.${datacenter}.${domain}`;

function serial(): string {
  // Positive (the top bit clear) and unique enough for a private CA.
  const b = randomBytes(16);
  b[0] = (b[0] as number) & 0x7f;
  return b.toString('hex');
}

async function exportKey(key: CryptoKey): Promise<string> {
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', key));
  const body = der.toString('base64').replace(/.{64}/g, '$&\n').replace(/\n?$/, '\n');
  return `-----BEGIN PRIVATE KEY-----\n${body}-----END PRIVATE KEY-----\n`;
}

/** A new CA: a self-signed certificate that may sign certificates (and nothing below them may). */
export async function createCA(options: CAOptions): Promise<Issued> {
  const lib = await x509();
  const keys = (await webcrypto.subtle.generateKey(EC_P256, true, ['sign', 'verify'])) as CryptoKeyPair;
  const now = Date.now();
  const cert = await lib.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=watchword agent CA ${serial().slice(0, 8)}, O=watchword, OU=${options.domain}`,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + options.days * DAY_MS),
    signingAlgorithm: EC_P256,
    keys,
    extensions: [
      new lib.BasicConstraintsExtension(true, 0, true),
      new lib.KeyUsagesExtension(lib.KeyUsageFlags.keyCertSign | lib.KeyUsageFlags.cRLSign | lib.KeyUsageFlags.digitalSignature, true),
      await lib.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { cert: cert.toString('pem'), key: await exportKey(keys.privateKey) };
}

/** The signing algorithm and WebCrypto key of a CA's private key (ECDSA P-256/P-384 or RSA). */
async function importSigningKey(pem: string): Promise<{ key: CryptoKey; algorithm: Algorithm }> {
  const k = createPrivateKey(pem);
  const der = k.export({ format: 'der', type: 'pkcs8' });
  if (k.asymmetricKeyType === 'ec') {
    const curve = k.asymmetricKeyDetails?.namedCurve;
    const namedCurve = curve === 'prime256v1' ? 'P-256' : curve === 'secp384r1' ? 'P-384' : undefined;
    if (!namedCurve) throw new Error(`the CA key's curve ${curve ?? '(unknown)'} is not supported (P-256 or P-384)`);
    const algorithm = { name: 'ECDSA', namedCurve, hash: namedCurve === 'P-256' ? 'SHA-256' : 'SHA-384' };
    return { key: await webcrypto.subtle.importKey('pkcs8', der, algorithm, false, ['sign']), algorithm };
  }
  if (k.asymmetricKeyType === 'rsa') {
    const algorithm = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' };
    return { key: await webcrypto.subtle.importKey('pkcs8', der, algorithm, false, ['sign']), algorithm };
  }
  throw new Error(`the CA key is of type ${k.asymmetricKeyType ?? 'unknown'}; expected an ECDSA or RSA key`);
}

/** A certificate for a server (`server.<dc>.<domain>`) or a client (`client.<dc>.<domain>`), signed by `ca`. */
export async function createCert(ca: Issued, options: CertOptions): Promise<Issued> {
  const lib = await x509();
  const caCert = new lib.X509Certificate(ca.cert);
  const signer = await importSigningKey(ca.key);
  const own = `${options.kind}.${options.datacenter}.${options.domain}`;
  const dns = [...new Set([own, 'localhost', ...(options.dnsNames ?? [])])];
  const ips = [...new Set(['127.0.0.1', ...(options.ipAddresses ?? [])])];
  const keys = (await webcrypto.subtle.generateKey(EC_P256, true, ['sign', 'verify'])) as CryptoKeyPair;
  const now = Date.now();
  const cert = await lib.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=${own}`,
    issuer: caCert.subject,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(Math.min(now + options.days * DAY_MS, caCert.notAfter.getTime())),
    signingAlgorithm: signer.algorithm,
    publicKey: keys.publicKey,
    signingKey: signer.key,
    extensions: [
      new lib.BasicConstraintsExtension(false, undefined, true),
      new lib.KeyUsagesExtension(lib.KeyUsageFlags.digitalSignature | lib.KeyUsageFlags.keyEncipherment, true),
      // Servers are clients of each other (a follower of its leader, a secondary of the primary), as in Consul.
      new lib.ExtendedKeyUsageExtension([lib.ExtendedKeyUsage.serverAuth, lib.ExtendedKeyUsage.clientAuth]),
      new lib.SubjectAlternativeNameExtension([
        ...dns.map((value) => ({ type: 'dns' as const, value })),
        ...ips.map((value) => ({ type: 'ip' as const, value })),
      ]),
      await lib.SubjectKeyIdentifierExtension.create(keys.publicKey),
      await lib.AuthorityKeyIdentifierExtension.create(caCert),
    ],
  });
  const pem = cert.toString('pem');
  // Checked with Node's own parser: what we hand out must verify against its CA.
  if (!new X509Certificate(pem).verify(new X509Certificate(ca.cert).publicKey))
    throw new Error('the new certificate does not verify against its CA');
  return { cert: pem, key: await exportKey(keys.privateKey) };
}
