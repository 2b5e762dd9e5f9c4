import { createPublicKey, generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import { CompactSign, compactVerify, createLocalJWKSet, exportJWK, exportSPKI, generateKeyPair } from 'jose';
import { describe, expect, it } from 'vitest';
import { JWS_ALGORITHMS, JwsError, type JwsAlgorithm, setKeys, verifyCompact } from '../../src/auth/jws.js';

type PrivateKey = Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];
type PublicKey = Awaited<ReturnType<typeof generateKeyPair>>['publicKey'];

const payload = new TextEncoder().encode(JSON.stringify({ sub: 'web', iss: 'test', exp: 4_000_000_000 }));

const pairs = new Map<JwsAlgorithm, Promise<{ publicKey: PublicKey; privateKey: PrivateKey; pub: KeyObject }>>();

/** A key pair for `alg`, made once per test file (RSA key generation is most of this file's time); `fresh` for a second one. */
function pair(alg: JwsAlgorithm, fresh = false) {
  const make = async () => {
    const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true });
    return { publicKey, privateKey, pub: createPublicKey(await exportSPKI(publicKey)) };
  };
  if (fresh) return make();
  let p = pairs.get(alg);
  if (p === undefined) pairs.set(alg, (p = make()));
  return p;
}

async function signed(alg: JwsAlgorithm, privateKey: PrivateKey, header: Record<string, unknown> = {}): Promise<string> {
  return new CompactSign(payload).setProtectedHeader({ alg, ...header }).sign(privateKey);
}

/** Whether jose accepts the JWS with this key (the reference this module must agree with). */
async function joseAccepts(jws: string, key: KeyObject | Parameters<typeof compactVerify>[1], algorithms: string[]): Promise<boolean> {
  try {
    await compactVerify(jws, key as KeyObject, { algorithms });
    return true;
  } catch {
    return false;
  }
}

function ours(jws: string, algorithms: readonly string[], keys: Parameters<typeof verifyCompact>[2]): JwsError['reason'] | 'ok' {
  try {
    verifyCompact(jws, algorithms, keys);
    return 'ok';
  } catch (err) {
    if (err instanceof JwsError) return err.reason;
    throw err;
  }
}

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

describe('compact JWS verification with node:crypto', () => {
  it.each(JWS_ALGORITHMS)('%s: a good JWS verifies and gives its payload; as jose says', async (alg) => {
    const { privateKey, pub } = await pair(alg);
    const jws = await signed(alg, privateKey);
    expect(verifyCompact(jws, [alg], { list: [pub] }).toString()).toBe(new TextDecoder().decode(payload));
    expect(await joseAccepts(jws, pub, [alg])).toBe(true);
  });

  it.each(JWS_ALGORITHMS)('%s: every one-character change of the payload or the signature is refused, as jose refuses it', async (alg) => {
    const { privateKey, pub } = await pair(alg);
    const jws = await signed(alg, privateKey);
    const [h, p, s] = jws.split('.') as [string, string, string];
    const flip = (x: string, i: number) => x.slice(0, i) + (x[i] === 'A' ? 'B' : 'A') + x.slice(i + 1);
    for (const i of [0, Math.floor(p.length / 2), p.length - 2]) {
      const bad = `${h}.${flip(p, i)}.${s}`;
      expect(ours(bad, [alg], { list: [pub] })).not.toBe('ok');
      expect(await joseAccepts(bad, pub, [alg])).toBe(false);
    }
    for (const i of [0, Math.floor(s.length / 2)]) {
      const bad = `${h}.${p}.${flip(s, i)}`;
      expect(ours(bad, [alg], { list: [pub] })).not.toBe('ok');
      expect(await joseAccepts(bad, pub, [alg])).toBe(false);
    }
  });

  it('an algorithm not allowed, or none, is refused before any key is tried', async () => {
    const { privateKey, pub } = await pair('RS256');
    const jws = await signed('RS256', privateKey);
    expect(ours(jws, ['ES256'], { list: [pub] })).toBe('algorithm');
    const [, p] = jws.split('.') as [string, string];
    expect(ours(`${b64({ alg: 'none' })}.${p}.`, ['RS256', 'none'], { list: [pub] })).toBe('algorithm');
    expect(ours(`${b64({ alg: 'HS256' })}.${p}.AAAA`, ['HS256'], { list: [pub] })).toBe('algorithm');
  });

  it('a key of another type, another curve, or RSA under 2048 bits does not fit (jose refuses them too)', async () => {
    const rsa = await pair('RS256');
    const jws = await signed('RS256', rsa.privateKey);
    const ec = (await pair('ES256')).pub;
    expect(ours(jws, ['RS256'], { list: [ec] })).toBe('no-key');
    const es384 = await pair('ES384');
    expect(ours(await signed('ES384', es384.privateKey), ['ES384'], { list: [ec] })).toBe('no-key');
    // A 1024-bit RSA key signing the same bytes.
    const small = generateKeyPairSync('rsa', { modulusLength: 1024 });
    const [h, p] = jws.split('.') as [string, string];
    const sig = sign('sha256', Buffer.from(`${h}.${p}`), small.privateKey).toString('base64url');
    expect(ours(`${h}.${p}.${sig}`, ['RS256'], { list: [small.publicKey] })).toBe('no-key');
    expect(await joseAccepts(`${h}.${p}.${sig}`, small.publicKey, ['RS256'])).toBe(false);
  });

  it('with several keys, the one that verifies is found', async () => {
    const a = await pair('ES256');
    const b = await pair('ES256', true);
    const c = await pair('RS256');
    expect(ours(await signed('ES256', b.privateKey), ['ES256'], { list: [c.pub, a.pub, b.pub] })).toBe('ok');
    expect(ours(await signed('ES256', b.privateKey), ['ES256'], { list: [a.pub] })).toBe('signature');
  });

  it('malformed forms are refused as such, never thrown as anything else', () => {
    for (const bad of [
      '',
      'a.b',
      'a.b.c.d',
      '!!.e30.AA',
      `${b64([1])}.e30.AA`,
      'bm90IGpzb24.e30.AA',
      `${b64({ alg: 'RS256' })}.e3*.AA`,
      `${b64({ alg: 'RS256' })}.e30.A A`,
    ]) {
      const r = ours(bad, ['RS256'], { list: [] });
      expect(r, bad).toBe('malformed');
    }
  });

  it('critical header parameters and the unencoded payload option are refused (jose refuses an unknown crit too)', async () => {
    // jose will not sign these: made by hand, each correctly signed.
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const p = Buffer.from(payload).toString('base64url');
    for (const header of [
      { alg: 'RS256', crit: ['exp'], exp: 1 },
      { alg: 'RS256', b64: false, crit: ['b64'] },
      { alg: 'RS256', b64: true },
    ]) {
      const h = b64(header);
      const jws = `${h}.${p}.${sign('sha256', Buffer.from(`${h}.${p}`), privateKey).toString('base64url')}`;
      expect(ours(jws, ['RS256'], { list: [publicKey] })).toBe('malformed');
    }
    const h = b64({ alg: 'RS256', crit: ['exp'], exp: 1 });
    const crit = `${h}.${p}.${sign('sha256', Buffer.from(`${h}.${p}`), privateKey).toString('base64url')}`;
    expect(await joseAccepts(crit, publicKey, ['RS256'])).toBe(false);
  });

  it('an ES256 signature in DER form (not the JWS form) is refused, as jose refuses it', async () => {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const pub = createPublicKey(privateKey);
    const h = b64({ alg: 'ES256' });
    const p = Buffer.from(payload).toString('base64url');
    const der = sign('sha256', Buffer.from(`${h}.${p}`), privateKey).toString('base64url');
    expect(ours(`${h}.${p}.${der}`, ['ES256'], { list: [pub] })).toBe('signature');
    expect(await joseAccepts(`${h}.${p}.${der}`, pub, ['ES256'])).toBe(false);
    const p1363 = sign('sha256', Buffer.from(`${h}.${p}`), { key: privateKey, dsaEncoding: 'ieee-p1363' }).toString('base64url');
    expect(ours(`${h}.${p}.${p1363}`, ['ES256'], { list: [pub] })).toBe('ok');
  });

  it('a key set: keys picked by kid, kty, alg, use and key_ops as jose picks them', async () => {
    const a = await pair('RS256');
    const b = await pair('RS256', true);
    const e = await pair('ES256');
    const jwk = async (k: Parameters<typeof exportJWK>[0], extra: Record<string, unknown>) => ({ ...(await exportJWK(k)), ...extra });
    const set = {
      keys: [
        await jwk(a.publicKey, { kid: 'a', use: 'sig' }),
        await jwk(b.publicKey, { kid: 'b', alg: 'RS256' }),
        await jwk(e.publicKey, { kid: 'e' }),
        { kty: 'oct', k: 'AAAA' },
      ],
    };
    // A set with anything but objects in it is refused whole, as jose refuses it.
    expect(() => setKeys({ keys: [...set.keys, 'junk'] })).toThrow(/malformed/);
    expect(() => createLocalJWKSet({ keys: [...set.keys, 'junk'] } as never)).toThrow();
    const keys = setKeys(set);
    expect(keys).toHaveLength(3);
    const jose = createLocalJWKSet(set as never);
    // No kid and two RSA keys: every fitting key is tried, as Consul's verifier (go-oidc's key set) tries them; jose v6 gives up.
    expect(ours(await signed('RS256', b.privateKey), ['RS256'], { set: keys })).toBe('ok');
    expect(await joseAccepts(await signed('RS256', b.privateKey), jose as never, ['RS256'])).toBe(false);
    const cases: Array<[string, string]> = [
      [await signed('RS256', b.privateKey, { kid: 'b' }), 'ok'],
      [await signed('RS256', b.privateKey, { kid: 'a' }), 'signature'],
      [await signed('RS256', b.privateKey, { kid: 'nope' }), 'no-key'],
      [await signed('ES256', e.privateKey, { kid: 'e' }), 'ok'],
      [await signed('RS384', (await pair('RS384')).privateKey, { kid: 'b' }), 'no-key'], // b says RS256 only
    ];
    for (const [jws, want] of cases) {
      const got = ours(jws, ['RS256', 'RS384', 'ES256'], { set: keys });
      expect(got, jws.slice(0, 40)).toBe(want);
      expect(await joseAccepts(jws, jose as never, ['RS256', 'RS384', 'ES256'])).toBe(want === 'ok');
    }
    const enc = setKeys({ keys: [await jwk(a.publicKey, { use: 'enc' })] });
    expect(ours(await signed('RS256', a.privateKey), ['RS256'], { set: enc })).toBe('no-key');
    const noVerify = setKeys({ keys: [await jwk(a.publicKey, { key_ops: ['encrypt'] })] });
    expect(ours(await signed('RS256', a.privateKey), ['RS256'], { set: noVerify })).toBe('no-key');
  });
});
