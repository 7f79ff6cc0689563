import { createPrivateKey, sign as cryptoSign, constants, type KeyObject, type X509Certificate } from 'node:crypto';

// The COSE_Sign1 (RFC 9052) that c2pa-wasm 0.13 wants from its signer: with
// `direct_cose_handling` the engine hands us the claim bytes and embeds whatever we return in
// the c2pa.signature box, so we build the whole structure ourselves. The C2PA spec (section
// 14.5 "COSE signing") fixes its shape: detached payload (nil), protected header with `alg`
// (1) and `x5chain` (33), and a `pad` entry in the unprotected header so the signature box
// keeps the size the engine reserved.

type Cbor = number | string | Uint8Array | null | Cbor[] | Map<number | string, Cbor> | { tag: number; value: Cbor };

function head(major: number, n: number): Buffer {
  if (n < 24) return Buffer.from([(major << 5) | n]);
  if (n < 0x100) return Buffer.from([(major << 5) | 24, n]);
  if (n < 0x10000) {
    const b = Buffer.alloc(3);
    b[0] = (major << 5) | 25;
    b.writeUInt16BE(n, 1);
    return b;
  }
  const b = Buffer.alloc(5);
  b[0] = (major << 5) | 26;
  b.writeUInt32BE(n, 1);
  return b;
}

/** A minimal deterministic CBOR encoder (RFC 8949): just the types a COSE_Sign1 needs. */
export function encodeCbor(v: Cbor): Buffer {
  if (v === null) return Buffer.from([0xf6]);
  if (typeof v === 'number') return v >= 0 ? head(0, v) : head(1, -1 - v);
  if (typeof v === 'string') {
    const s = Buffer.from(v, 'utf8');
    return Buffer.concat([head(3, s.length), s]);
  }
  if (v instanceof Uint8Array) return Buffer.concat([head(2, v.length), v]);
  if (Array.isArray(v)) return Buffer.concat([head(4, v.length), ...v.map(encodeCbor)]);
  if (v instanceof Map)
    return Buffer.concat([head(5, v.size), ...[...v].flatMap(([k, x]) => [encodeCbor(k), encodeCbor(x)])]);
  return Buffer.concat([head(6, v.tag), encodeCbor(v.value)]);
}

export interface CoseAlg {
  /** The name c2pa-rs knows the algorithm by. */
  name: 'es256' | 'es384' | 'es512' | 'ps256' | 'ed25519';
  /** The COSE algorithm identifier (IANA COSE Algorithms registry). */
  id: number;
  sign(key: KeyObject, data: Uint8Array): Buffer;
}

/** Picks the COSE algorithm the C2PA spec allows for this key (section 13.2: ES*, PS*, Ed25519). */
export function algForKey(key: KeyObject): CoseAlg | undefined {
  const d = key.asymmetricKeyDetails;
  switch (key.asymmetricKeyType) {
    case 'ec': {
      const byCurve = {
        prime256v1: ['es256', -7, 'sha256'],
        secp384r1: ['es384', -35, 'sha384'],
        secp521r1: ['es512', -36, 'sha512'],
      } as const;
      const c = byCurve[(d?.namedCurve ?? '') as keyof typeof byCurve];
      if (!c) return undefined;
      // COSE wants the raw r||s signature, not DER (RFC 9053 section 2.1).
      return { name: c[0], id: c[1], sign: (k, data) => cryptoSign(c[2], data, { key: k, dsaEncoding: 'ieee-p1363' }) };
    }
    case 'ed25519':
      return { name: 'ed25519', id: -8, sign: (k, data) => cryptoSign(null, data, k) };
    case 'rsa':
    case 'rsa-pss':
      return {
        name: 'ps256',
        id: -37,
        sign: (k, data) =>
          cryptoSign('sha256', data, { key: k, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 }),
      };
    default:
      return undefined;
  }
}

export interface CoseSignerOptions {
  key: KeyObject;
  alg: CoseAlg;
  /** Leaf first; the trust anchor may be left out. */
  chain: X509Certificate[];
}

/** Room for the structure: certificates, signature and headers, with margin for the pad header. */
export function reserveSizeFor(chain: X509Certificate[]): number {
  return chain.reduce((n, c) => n + c.raw.length, 0) + 1024;
}

/**
 * Builds the tagged COSE_Sign1 over `claim`, padded to exactly `reserveSize` bytes.
 * Sig_structure = ["Signature1", protected, external_aad = h'', payload = claim] (RFC 9052 4.4).
 */
export function coseSign1(claim: Uint8Array, opts: CoseSignerOptions & { reserveSize: number }): Uint8Array {
  const certs = opts.chain.map((c) => new Uint8Array(c.raw));
  const x5chain: Cbor = certs.length === 1 ? (certs[0] ?? null) : certs;
  const protectedBytes = encodeCbor(
    new Map<number, Cbor>([
      [1, opts.alg.id],
      [33, x5chain],
    ]),
  );
  const toSign = encodeCbor(['Signature1', protectedBytes, new Uint8Array(0), claim]);
  const signature = opts.alg.sign(opts.key, toSign);
  const build = (padLen: number) =>
    encodeCbor({
      tag: 18,
      value: [protectedBytes, new Map<string, Cbor>([['pad', new Uint8Array(padLen)]]), null, signature],
    });
  // The pad's length prefix grows with the pad, so step until the total hits the target.
  let pad = Math.max(0, opts.reserveSize - build(0).length);
  for (let i = 0; i < 8; i++) {
    const len = build(pad).length;
    if (len === opts.reserveSize) return build(pad);
    pad += opts.reserveSize - len;
    if (pad < 0) break;
  }
  throw new Error(`the COSE signature does not fit the ${opts.reserveSize} bytes reserved for it`);
}

export function loadPrivateKey(pem: string): KeyObject {
  return createPrivateKey({ key: pem, format: 'pem' });
}
