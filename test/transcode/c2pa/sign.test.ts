import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, open, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect, promisify } from 'node:util';
import { ConfigError } from '../../../src/config/index.ts';
import {
  loadC2paSigner,
  readManifest,
  signMp4,
  CLAIM_GENERATOR,
  type C2paSigner,
} from '../../../src/transcode/c2pa.ts';
import { makeTestCerts, type TestCerts } from '../../helpers/c2pa-certs.ts';

const run = promisify(execFile);
let certs: TestCerts;
let signer: C2paSigner;
let dir: string;
let plain: string;
let fragmented: string;

async function ffmpeg(args: string[]): Promise<string> {
  return (await run('ffmpeg', ['-v', 'error', '-nostdin', ...args], { maxBuffer: 64 << 20 })).stdout;
}

/** framemd5 of every stream without the header comments: equal means frame-identical decode. */
async function framemd5(path: string): Promise<string> {
  const out = await ffmpeg(['-i', path, '-map', '0', '-f', 'framemd5', '-']);
  return out
    .split('\n')
    .filter((l) => !l.startsWith('#'))
    .join('\n');
}

/** Top-level box types of an MP4, in order. */
async function topBoxes(path: string): Promise<{ type: string; offset: number; size: number }[]> {
  const buf = await readFile(path);
  const boxes: { type: string; offset: number; size: number }[] = [];
  for (let off = 0; off + 8 <= buf.length; ) {
    let size = buf.readUInt32BE(off);
    const type = buf.toString('latin1', off + 4, off + 8);
    if (size === 1) size = Number(buf.readBigUInt64BE(off + 8));
    if (size === 0) size = buf.length - off;
    boxes.push({ type, offset: off, size });
    off += size;
  }
  return boxes;
}

const config = (over: Partial<{ c2paKey: string; c2paCerts: string; c2paTrustAnchors: string }>) => ({
  c2paKey: undefined,
  c2paCerts: undefined,
  c2paTrustAnchors: undefined,
  ...over,
});

before(async () => {
  certs = await makeTestCerts();
  const s = await loadC2paSigner(config({ c2paKey: certs.keyPath, c2paCerts: certs.chainPath }));
  assert.ok(s);
  signer = s;
  dir = await mkdtemp(join(tmpdir(), 'mp-c2pa-'));
  plain = join(dir, 'plain.mp4');
  fragmented = join(dir, 'frag.mp4');
  // A small faststart H.264 + AAC file, 3 s, like a rendition the pipeline writes.
  await ffmpeg([
    '-f',
    'lavfi',
    '-i',
    'testsrc=size=320x180:rate=25',
    '-f',
    'lavfi',
    '-i',
    'sine=frequency=440:sample_rate=48000',
    '-t',
    '3',
    '-c:v',
    'libx264',
    '-preset',
    'ultrafast',
    '-g',
    '25',
    '-pix_fmt',
    'yuv420p',
    '-c:a',
    'aac',
    '-b:a',
    '64k',
    '-movflags',
    '+faststart',
    plain,
  ]);
  await ffmpeg(['-i', plain, '-c', 'copy', '-movflags', '+frag_keyframe+empty_moov+default_base_moof', fragmented]);
});

test('without key and certificates C2PA signing is off', async () => {
  assert.equal(await loadC2paSigner(config({})), undefined);
});

test('a signed MP4 verifies as Trusted against the test root, with title, generator and actions', async () => {
  const out = join(dir, '720p0.mp4');
  await signMp4({ input: plain, output: out, title: '720p0', parent: { path: plain, title: 'input.mp4' }, signer });
  const r = await readManifest(out, certs.rootPem);
  assert.equal(r.state, 'Trusted', JSON.stringify(r.failures));
  assert.deepEqual(r.failures, []);
  const m = r.activeManifest ?? {};
  assert.equal(m.title, '720p0');
  const gen = (m.claim_generator_info as { name: string; version: string }[])[0];
  assert.equal(`${gen?.name}/${gen?.version}`, CLAIM_GENERATOR);
  const assertions = m.assertions as { label: string; data: { actions?: { action: string }[] } }[];
  const actions = assertions.find((a) => a.label.startsWith('c2pa.actions'))?.data.actions?.map((a) => a.action);
  assert.deepEqual(actions, ['c2pa.opened', 'c2pa.transcoded']);
  const ingredients = m.ingredients as { title: string; relationship: string; description?: string }[];
  assert.equal(ingredients[0]?.relationship, 'parentOf');
  assert.equal(ingredients[0]?.title, 'input.mp4');
  assert.match(ingredients[0]?.description ?? '', /sha256/);
  // Without the root the same file is Valid but not Trusted.
  assert.equal((await readManifest(out)).state, 'Valid');
});

test('the signed MP4 stays faststart and decodes frame-identical to the unsigned one', async () => {
  const out = join(dir, 'fs.mp4');
  await signMp4({ input: plain, output: out, title: '360p0', signer });
  const types = (await topBoxes(out)).map((b) => b.type);
  assert.ok(types.indexOf('moov') < types.indexOf('mdat'), `moov before mdat: ${types.join(',')}`);
  assert.ok(types.includes('uuid'), 'C2PA manifest box present');
  assert.equal(await framemd5(out), await framemd5(plain));
});

test('flipping a byte of mdat makes the reader report a hash mismatch', async () => {
  const out = join(dir, 'tampered.mp4');
  await signMp4({ input: plain, output: out, title: 'tampered', signer });
  const mdat = (await topBoxes(out)).find((b) => b.type === 'mdat');
  assert.ok(mdat);
  const fh = await open(out, 'r+');
  const pos = mdat.offset + Math.floor(mdat.size / 2);
  const b = Buffer.alloc(1);
  await fh.read(b, 0, 1, pos);
  b[0] = (b[0] ?? 0) ^ 0xff;
  await fh.write(b, 0, 1, pos);
  await fh.close();
  const r = await readManifest(out, certs.rootPem);
  assert.equal(r.state, 'Invalid');
  assert.ok(
    r.failures.some((f) => f.code === 'assertion.bmffHash.mismatch'),
    JSON.stringify(r.failures),
  );
});

test('a C2PA-signed input is kept as the parent ingredient with its manifest', async () => {
  const first = join(dir, 'gen1.mp4');
  const second = join(dir, 'gen2.mp4');
  await signMp4({ input: plain, output: first, title: 'gen1', signer });
  await signMp4({ input: plain, output: second, title: 'gen2', parent: { path: first }, signer });
  const r = await readManifest(second, certs.rootPem);
  assert.equal(r.state, 'Trusted', JSON.stringify(r.failures));
  const ingredient = (
    r.activeManifest?.ingredients as { relationship: string; active_manifest?: string }[] | undefined
  )?.[0];
  assert.equal(ingredient?.relationship, 'parentOf');
  assert.ok(ingredient?.active_manifest, 'the parent manifest is referenced');
  const manifests = r.manifestStore.manifests as Record<string, { title: string }>;
  assert.ok(
    Object.values(manifests).some((m) => m.title === 'gen1'),
    'the parent manifest is in the store',
  );
});

test('a single-file fragmented MP4 (CMAF) signs and verifies too', async () => {
  const out = join(dir, 'frag-signed.mp4');
  await signMp4({ input: fragmented, output: out, title: 'frag', signer });
  const r = await readManifest(out, certs.rootPem);
  assert.equal(r.state, 'Trusted', JSON.stringify(r.failures));
  assert.equal(await framemd5(out), await framemd5(fragmented));
});

test('a certificate the C2PA rules reject stops start-up with a message naming the setting', async () => {
  await assert.rejects(
    loadC2paSigner(config({ c2paKey: certs.selfSignedKeyPath, c2paCerts: certs.selfSignedChainPath })),
    (e: unknown) => e instanceof ConfigError && /MEDIAPLANE_C2PA_CERTS: .*self-signed/.test(e.message),
  );
  await assert.rejects(
    loadC2paSigner(config({ c2paKey: certs.wrongEkuKeyPath, c2paCerts: certs.wrongEkuChainPath })),
    (e: unknown) => e instanceof ConfigError && /MEDIAPLANE_C2PA_CERTS: .*extended key usage/.test(e.message),
  );
  await assert.rejects(
    loadC2paSigner(config({ c2paKey: certs.wrongEkuKeyPath, c2paCerts: certs.chainPath })),
    (e: unknown) => e instanceof ConfigError && /key does not belong/.test(e.message),
  );
  await assert.rejects(
    loadC2paSigner(config({ c2paKey: certs.keyPath })),
    (e: unknown) => e instanceof ConfigError && /MEDIAPLANE_C2PA_CERTS: must be set/.test(e.message),
  );
  await assert.rejects(
    loadC2paSigner(config({ c2paKey: certs.chainPath, c2paCerts: certs.chainPath })),
    (e: unknown) => e instanceof ConfigError && /MEDIAPLANE_C2PA_KEY: .* is not a PEM private key/.test(e.message),
  );
});

test('the signing key never shows in the signer, its inspection or an error', async () => {
  const keyPem = await readFile(certs.keyPath, 'utf8');
  const body = keyPem
    .split('\n')
    .filter((l) => l && !l.startsWith('-----'))
    .join('');
  const shown = [JSON.stringify(signer), inspect(signer, { depth: 10, showHidden: true })];
  try {
    await loadC2paSigner(config({ c2paKey: certs.keyPath, c2paCerts: certs.wrongEkuChainPath }));
  } catch (e) {
    shown.push(inspect(e, { depth: 10 }), String(e));
  }
  for (const s of shown) {
    assert.ok(!s.replace(/\s/g, '').includes(body.slice(0, 40)), 'no key material');
  }
});

test('a signing failure rejects with a message (the task fails, nothing is skipped)', async () => {
  const notMp4 = join(dir, 'not.mp4');
  await (await open(notMp4, 'w')).writeFile('this is not a video');
  await assert.rejects(
    signMp4({ input: notMp4, output: join(dir, 'x.mp4'), title: 'broken', signer }),
    /C2PA signing of broken failed/,
  );
});
