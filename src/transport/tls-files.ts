import { readFileSync } from 'node:fs';
import { type KeyObject, X509Certificate, createPrivateKey } from 'node:crypto';

/** Certificate, key and CA as read from their files, checked to belong together. */
export interface TlsMaterial {
  /** PEM CA bundle (undefined: none configured). */
  ca: string | undefined;
  cert: string;
  key: string;
  /** The certificate, parsed. */
  certificate: X509Certificate;
}

/** A file that cannot serve: the message is one line naming the setting, the file and the problem. */
export class TlsFileError extends Error {
  override name = 'TlsFileError';
}

function read(setting: string, path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new TlsFileError(`${setting} ${path}: cannot read it (${code ?? (err as Error).message})`);
  }
}

/** Every certificate in a PEM bundle; none is an error. */
function certificates(setting: string, path: string, pem: string): X509Certificate[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new TlsFileError(`${setting} ${path}: holds no PEM certificate`);
  return blocks.map((b) => {
    try {
      return new X509Certificate(b);
    } catch (err) {
      throw new TlsFileError(`${setting} ${path}: a certificate in it cannot be parsed (${(err as Error).message})`);
    }
  });
}

export interface TlsFiles {
  caFile?: string | undefined;
  certFile: string;
  keyFile: string;
}

/**
 * Reads and checks a certificate, its key and (when given) a CA: each file readable and of
 * its kind, the key the certificate's own. `settings` names the config keys in messages
 * (`tls` for tls_cert_file, …; `etcd` for etcd_cert_file, …).
 */
export function loadTlsFiles(files: TlsFiles, settings = 'tls'): TlsMaterial {
  const certSetting = `${settings}_cert_file`;
  const keySetting = `${settings}_key_file`;
  const cert = read(certSetting, files.certFile);
  const [certificate] = certificates(certSetting, files.certFile, cert) as [X509Certificate];
  const key = read(keySetting, files.keyFile);
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(key);
  } catch {
    throw new TlsFileError(`${keySetting} ${files.keyFile}: holds no PEM private key`);
  }
  if (!certificate.checkPrivateKey(privateKey)) {
    throw new TlsFileError(`${keySetting} ${files.keyFile}: is not the key of the certificate in ${certSetting} ${files.certFile}`);
  }
  const ca = files.caFile === undefined ? undefined : loadCA(files.caFile, `${settings}_ca_file`);
  return { ca, cert, key, certificate };
}

/** A CA bundle: one or more PEM certificates. */
export function loadCA(path: string, setting: string): string {
  const pem = read(setting, path);
  certificates(setting, path, pem);
  return pem;
}
