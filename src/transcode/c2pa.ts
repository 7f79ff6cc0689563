import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import { basename, extname } from 'node:path';
import { deflateSync } from 'node:zlib';
import type { KeyObject, X509Certificate } from 'node:crypto';
import pkg from '../../package.json' with { type: 'json' };
import type { WasmBuilder } from '@contentauth/c2pa-wasm';
import { ConfigError, type Config } from '../config/index.ts';
import { CancelledError, InternalError } from '../lib/errors.ts';
import { algForKey, coseSign1, loadPrivateKey, reserveSizeFor, type CoseAlg } from './c2pa/cose.ts';
import { checkChain, parsePemChain } from './c2pa/certs.ts';
import { bytesBlob, engine, fileBlob } from './c2pa/wasm.ts';

// C2PA content credentials for MP4 outputs (issue 5), with the official engine
// (@contentauth/c2pa-wasm: c2pa-rs built to WebAssembly). The engine inserts its manifest box
// before `moov` and fixes the chunk offsets, so a faststart file stays faststart and decodes
// frame-identical (tested in test/transcode/c2pa).

export const CLAIM_GENERATOR = `mediaplane/${pkg.version}`;

/** A loaded key and chain. The key never leaves this object: no toJSON, no log field. */
export interface C2paSigner {
  readonly alg: CoseAlg['name'];
  /** Subject of the leaf certificate, for the start-up log line. */
  readonly subject: string;
  readonly reserveSize: number;
  /** Roots (PEM) the engine validates an input's own manifest against when it becomes the parent. */
  readonly trustAnchorsPem: string | undefined;
  /** The wasm engine's signer definition (a fresh one per call). */
  definition(): {
    alg: string;
    reserveSize: number;
    sign(bytes: Uint8Array<ArrayBuffer>): Promise<Uint8Array<ArrayBuffer>>;
  };
}

export type C2paConfig = Pick<Config, 'c2paKey' | 'c2paCerts' | 'c2paTrustAnchors'>;

function makeSigner(
  key: KeyObject,
  alg: CoseAlg,
  chain: X509Certificate[],
  trustAnchorsPem: string | undefined,
): C2paSigner {
  const reserveSize = reserveSizeFor(chain);
  const leaf = chain[0];
  return Object.freeze({
    alg: alg.name,
    subject: leaf ? leaf.subject.replace(/\n/g, ', ') : '',
    reserveSize,
    trustAnchorsPem,
    definition: () => ({
      alg: alg.name,
      reserveSize,
      sign: async (claim: Uint8Array<ArrayBuffer>) =>
        new Uint8Array(coseSign1(claim, { key, alg, chain, reserveSize })),
    }),
  });
}

/**
 * Reads MEDIAPLANE_C2PA_KEY and MEDIAPLANE_C2PA_CERTS and checks them against the C2PA
 * certificate rules, then signs and verifies a tiny image with the engine as a self-test.
 * Undefined when neither is set; a ConfigError naming the setting when anything is wrong.
 */
export async function loadC2paSigner(config: C2paConfig): Promise<C2paSigner | undefined> {
  const { c2paKey, c2paCerts } = config;
  if (!c2paKey && !c2paCerts) return undefined;
  if (!c2paKey || !c2paCerts) {
    throw new ConfigError([
      `${c2paKey ? 'MEDIAPLANE_C2PA_CERTS' : 'MEDIAPLANE_C2PA_KEY'}: must be set too when ${c2paKey ? 'MEDIAPLANE_C2PA_KEY' : 'MEDIAPLANE_C2PA_CERTS'} is set (C2PA signing needs both the key and its certificate chain)`,
    ]);
  }
  const read = async (env: string, path: string) => {
    try {
      return await readFile(path, 'utf8');
    } catch (err) {
      throw new ConfigError([`${env}: cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`]);
    }
  };
  let key: KeyObject;
  try {
    key = loadPrivateKey(await read('MEDIAPLANE_C2PA_KEY', c2paKey));
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    // The parser's message could quote the file; say only what went wrong.
    throw new ConfigError([`MEDIAPLANE_C2PA_KEY: ${c2paKey} is not a PEM private key`]);
  }
  const alg = algForKey(key);
  if (!alg)
    throw new ConfigError([
      `MEDIAPLANE_C2PA_KEY: ${key.asymmetricKeyType ?? 'this'} key cannot sign C2PA manifests (use EC P-256/P-384/P-521, Ed25519 or RSA)`,
    ]);
  const chain = parsePemChain(await read('MEDIAPLANE_C2PA_CERTS', c2paCerts));
  const problems = checkChain(chain, key);
  if (problems.length > 0) throw new ConfigError(problems.map((p) => `MEDIAPLANE_C2PA_CERTS: ${p}`));
  const anchors = config.c2paTrustAnchors
    ? await read('MEDIAPLANE_C2PA_TRUST_ANCHORS', config.c2paTrustAnchors)
    : selfSignedRoot(chain);
  const signer = makeSigner(key, alg, chain, anchors);
  await selfTest(signer, anchors);
  return signer;
}

function selfSignedRoot(chain: X509Certificate[]): string | undefined {
  const last = chain.at(-1);
  return last && chain.length > 1 && last.checkIssued(last) ? last.toString() : undefined;
}

/** A 1x1 PNG built in code, so the self-test needs no file and no ffmpeg. */
function tinyPng(): Uint8Array {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (b: Buffer) => {
    let c = 0xffffffff;
    for (const x of b) c = (crcTable[(c ^ x) & 0xff] ?? 0) ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const td = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const c = Buffer.alloc(4);
    c.writeUInt32BE(crc(td));
    return Buffer.concat([len, td, c]);
  };
  const ihdr = Buffer.from([0, 0, 0, 1, 0, 0, 0, 1, 8, 2, 0, 0, 0]);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(Buffer.from([0, 0, 0, 0]))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** Signs a tiny PNG and reads it back: the engine's own verdict on the key and chain. */
async function selfTest(signer: C2paSigner, trustAnchorsPem: string | undefined): Promise<void> {
  const { WasmBuilder } = engine();
  const manifest = {
    claim_generator_info: [{ name: 'mediaplane', version: pkg.version }],
    title: 'self-test.png',
    format: 'image/png',
    assertions: [{ label: 'c2pa.actions.v2', data: actions(false) }],
  };
  let signed: Uint8Array;
  try {
    const b = WasmBuilder.fromJson(JSON.stringify(manifest), JSON.stringify(engineContext(undefined)));
    signed = await b.sign(signer.definition(), [], 'image/png', bytesBlob(tinyPng()));
    b.free();
  } catch (err) {
    throw new ConfigError([
      `MEDIAPLANE_C2PA_CERTS: the C2PA engine could not sign with this key and chain: ${errorText(err)}`,
    ]);
  }
  const report = await readBytes(signed, 'image/png', trustAnchorsPem);
  const failures = report.failures.filter(
    (f) => !(trustAnchorsPem === undefined && f.code === 'signingCredential.untrusted'),
  );
  if (failures.length > 0) {
    throw new ConfigError([
      `MEDIAPLANE_C2PA_CERTS: the C2PA engine rejects this certificate chain: ${failures.map((f) => `${f.code}${f.explanation ? ` (${f.explanation})` : ''}`).join(', ')}`,
    ]);
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Settings for c2pa-rs: verify after signing, and our trust anchors when we have them. */
function engineContext(trustAnchorsPem: string | undefined): Record<string, unknown> {
  return {
    ...(trustAnchorsPem ? { trust: { trust_anchors: trustAnchorsPem } } : {}),
    verify: { verify_after_sign: false },
  };
}

export interface ParentAsset {
  /** The transcode's input file on disk. */
  path: string;
  /** Shown as the ingredient's title; the file name when absent. */
  title?: string;
  /** MIME type; guessed from the extension when absent. */
  format?: string;
}

export interface SignMp4Options {
  input: string;
  output: string;
  /** The rendition name (C2PA `title`). */
  title: string;
  parent?: ParentAsset;
  signer: C2paSigner;
  signal?: AbortSignal;
}

// Formats the engine can open as an ingredient (it then keeps an input's own manifest as the
// parent's). Others (webm, mkv) go in as a described ingredient with our own hash.
const INGREDIENT_FORMATS: Record<string, string> = {
  '.mp4': 'video/mp4',
  '.m4v': 'video/mp4',
  '.mov': 'video/quicktime',
  '.m4a': 'audio/mp4',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.png': 'image/png',
  '.webp': 'image/webp',
  '.avi': 'video/avi',
  '.wav': 'audio/wav',
  '.mp3': 'audio/mpeg',
};
const OTHER_FORMATS: Record<string, string> = {
  '.webm': 'video/webm',
  '.mkv': 'video/x-matroska',
  '.ts': 'video/mp2t',
  '.flv': 'video/x-flv',
};

async function sha256File(path: string, signal?: AbortSignal): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(path, signal ? { signal } : {})) h.update(chunk as Buffer);
  return h.digest('base64');
}

function actions(hasParent: boolean): unknown {
  const agent = { name: 'mediaplane', version: pkg.version };
  // A manifest's first action must be c2pa.opened (with a parent) or c2pa.created (spec 2.x, 18.15.4.8).
  const first = hasParent
    ? { action: 'c2pa.opened', parameters: { ingredientIds: ['parent'] }, softwareAgent: agent }
    : {
        action: 'c2pa.created',
        digitalSourceType: 'http://cv.iptc.org/newscodes/digitalsourcetype/digitalCapture',
        softwareAgent: agent,
      };
  return {
    actions: [first, { action: 'c2pa.transcoded', softwareAgent: agent, description: 'Transcoded by Mediaplane' }],
  };
}

/**
 * Signs the MP4 at `input` into `output` (they may be the same path). The signed bytes come
 * back from the engine in one buffer: the engine has no streaming output in 0.13, so peak
 * memory is about one rendition's size. A failure throws an InternalError with the engine's
 * message; the caller fails the task with it.
 */
export async function signMp4(opts: SignMp4Options): Promise<void> {
  const { WasmBuilder } = engine();
  const check = () => {
    if (opts.signal?.aborted) throw new CancelledError();
  };
  check();
  const manifest = {
    claim_generator_info: [{ name: 'mediaplane', version: pkg.version }],
    title: opts.title,
    format: 'video/mp4',
    assertions: [{ label: 'c2pa.actions.v2', data: actions(opts.parent !== undefined) }],
  };
  const builder = WasmBuilder.fromJson(
    JSON.stringify(manifest),
    JSON.stringify(engineContext(opts.signer.trustAnchorsPem)),
  );
  const closers: (() => void)[] = [];
  const tmp = `${opts.output}.c2pa-${process.pid}.tmp`;
  try {
    if (opts.parent) await addParent(builder, opts.parent, opts.signal, closers);
    check();
    const src = fileBlob(opts.input);
    closers.push(src.close);
    let signed: Uint8Array;
    try {
      signed = await builder.sign(opts.signer.definition(), [], 'video/mp4', src.blob);
    } catch (err) {
      throw new InternalError(`C2PA signing of ${opts.title} failed: ${errorText(err)}`, { cause: err });
    }
    check();
    await writeFile(tmp, signed, opts.signal ? { signal: opts.signal } : {});
    await rename(tmp, opts.output);
  } finally {
    for (const close of closers) close();
    builder.free();
    await rm(tmp, { force: true });
  }
}

async function addParent(
  builder: WasmBuilder,
  parent: ParentAsset,
  signal: AbortSignal | undefined,
  closers: (() => void)[],
): Promise<void> {
  const ext = extname(parent.path).toLowerCase();
  const format = parent.format ?? INGREDIENT_FORMATS[ext] ?? OTHER_FORMATS[ext];
  // The input's hash goes in whatever the format: it ties the output to the exact bytes it came from.
  const hash = await sha256File(parent.path, signal);
  const def = {
    title: parent.title ?? basename(parent.path),
    relationship: 'parentOf',
    label: 'parent',
    hash,
    description: `sha256 (base64) of the input: ${hash}`,
  };
  if (format && Object.values(INGREDIENT_FORMATS).includes(format)) {
    const src = fileBlob(parent.path);
    closers.push(src.close);
    try {
      // The engine reads the input here and keeps its own C2PA manifest, if it has one.
      await builder.addIngredientFromBlob(JSON.stringify({ ...def, format }), format, src.blob);
      return;
    } catch {
      // An input the engine cannot parse as its format is still recorded, by hash, below.
    }
  }
  builder.addIngredient(JSON.stringify({ ...def, format: format ?? 'application/octet-stream' }));
}

export interface ManifestReport {
  /** `Invalid`, `Valid` or `Trusted` (c2pa-rs validation_state). */
  state: string;
  activeManifest: Record<string, unknown> | undefined;
  failures: { code: string; explanation?: string; url?: string }[];
  manifestStore: Record<string, unknown>;
}

async function readBytes(bytes: Uint8Array, format: string, trustAnchorsPem?: string): Promise<ManifestReport> {
  const { WasmReader } = engine();
  const reader = await WasmReader.fromBytes(format, bytes, JSON.stringify(engineContext(trustAnchorsPem)));
  return report(reader);
}

function report(reader: { json(): string; free(): void }): ManifestReport {
  try {
    const store = JSON.parse(reader.json()) as {
      active_manifest?: string;
      manifests?: Record<string, Record<string, unknown>>;
      validation_state?: string;
      validation_results?: { activeManifest?: { failure?: { code: string; explanation?: string; url?: string }[] } };
      validation_status?: { code: string; explanation?: string; url?: string }[];
    };
    const failures = store.validation_results?.activeManifest?.failure ?? store.validation_status ?? [];
    return {
      state: store.validation_state ?? 'Invalid',
      activeManifest: store.active_manifest ? store.manifests?.[store.active_manifest] : undefined,
      failures,
      manifestStore: store as Record<string, unknown>,
    };
  } finally {
    reader.free();
  }
}

/** Reads and validates the manifest of the MP4 at `path` (trusted against `trustAnchorsPem` when given). */
export async function readManifest(path: string, trustAnchorsPem?: string): Promise<ManifestReport> {
  const { WasmReader } = engine();
  const src = fileBlob(path);
  try {
    const reader = await WasmReader.fromBlob('video/mp4', src.blob, JSON.stringify(engineContext(trustAnchorsPem)));
    return report(reader);
  } finally {
    src.close();
  }
}
