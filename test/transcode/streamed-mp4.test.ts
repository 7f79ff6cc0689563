// An MP4 going up while ffmpeg writes it (src/transcode/streamed-mp4.ts), against the real S3
// protocol server and a real ffmpeg run: the object in the bucket is byte for byte the
// finished faststart file, parts went up before ffmpeg exited, a part whose bytes changed
// afterwards is sent again, and a file of an unknown layout is left to the plain upload.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile, open } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { S3ObjectStore, type ObjectStore, type PartWriter } from '../../src/storage/index.ts';
import { StreamedMp4, topLevelBoxes } from '../../src/transcode/streamed-mp4.ts';
import { startS3, type TestS3 } from '../helpers/s3.ts';

let s3: TestS3;
let bucket: string;
let store: S3ObjectStore;
let dir: string;

before(async () => {
  s3 = await startS3();
  bucket = await s3.createBucket();
  store = new S3ObjectStore(
    { endpoint: s3.endpoint, bucket, credentials: s3.credentials, region: s3.region },
    { maxAttempts: 2, partSizeBytes: 8 << 20, allowPrivate: true },
  );
  dir = await mkdtemp(path.join(os.tmpdir(), 'mp-streamed-'));
});
after(async () => {
  await store.discard();
  await s3.close();
  await rm(dir, { recursive: true, force: true });
});

/** The store's parts, but small (the test server does not hold parts to S3's 5 MiB), counting puts. */
function smallParts(log: string[]): NonNullable<ObjectStore['parts']> {
  const parts = store.parts;
  return {
    minBytes: 96 * 1024,
    partBytes: 64 * 1024,
    async open(key, opts): Promise<PartWriter> {
      const w = await parts.open(key, opts);
      return {
        put: async (n, r) => {
          log.push(`put ${n}`);
          await w.put(n, r);
        },
        ensure: async (n, r) => {
          log.push(`ensure ${n}`);
          await w.ensure(n, r);
        },
        complete: () => w.complete(),
        abort: async () => {
          log.push('abort');
          await w.abort();
        },
      };
    },
  };
}

const signal = new AbortController().signal;

/** Runs ffmpeg at real speed to a faststart MP4, calling `tick` every 100 ms while it runs. */
async function encodeSlowly(file: string, tick: () => void): Promise<void> {
  const args = [
    '-v',
    'error',
    '-y',
    '-re',
    '-f',
    'lavfi',
    '-i',
    'testsrc2=s=320x240:r=25:d=3',
    '-f',
    'lavfi',
    '-i',
    'sine=d=3',
    '-c:v',
    'libx264',
    '-preset',
    'ultrafast',
    '-b:v',
    '2M',
    '-c:a',
    'aac',
    '-movflags',
    '+faststart',
    file,
  ];
  const child = spawn('ffmpeg', args, { stdio: 'ignore' });
  const timer = setInterval(tick, 100);
  const code = await new Promise<number | null>((r) => child.once('exit', r));
  clearInterval(timer);
  assert.equal(code, 0);
}

test('an MP4 goes up while ffmpeg writes it; the object is the finished faststart file, byte for byte', async () => {
  const file = path.join(dir, 'a.mp4');
  const log: string[] = [];
  const s = new StreamedMp4({
    parts: smallParts(log),
    key: 'out/a.mp4',
    file,
    put: { contentType: 'video/mp4', signal },
  });
  const errors: unknown[] = [];
  await encodeSlowly(file, () => s.poll((e) => errors.push(e)));
  const early = log.filter((l) => l.startsWith('put')).length;
  assert.ok(early >= 3, `parts sent during the encode: ${early}`);
  const size = await s.finish();
  assert.deepEqual(errors, []);
  const local = await readFile(file);
  assert.equal(size, local.length);
  const types = (await topLevelBoxes(file)).map((b) => b.type);
  assert.ok(types.indexOf('moov') < types.indexOf('mdat'), `faststart layout: ${types.join(' ')}`);
  const got = await s3.get(bucket, 'out/a.mp4');
  assert.equal(got.contentType, 'video/mp4');
  assert.ok(got.body.equals(local), 'the object is the local file');
  assert.ok(log.includes('put 1') && log.includes('ensure 2'), 'the head went last; early parts were checked');
});

test('an early part whose bytes changed before the end is sent again', async () => {
  const file = path.join(dir, 'b.mp4');
  const log: string[] = [];
  const s = new StreamedMp4({
    parts: smallParts(log),
    key: 'out/b.mp4',
    file,
    put: { contentType: 'video/mp4', signal },
  });
  await encodeSlowly(file, () => s.poll(() => undefined));
  // Change one byte inside part 2's range of the finished file (the media data after part 1's share).
  const mdat = (await topLevelBoxes(file)).find((b) => b.type === 'mdat');
  assert.ok(mdat);
  const fh = await open(file, 'r+');
  const at = mdat.start + mdat.header + 96 * 1024 + 10;
  const one = Buffer.alloc(1);
  await fh.read(one, 0, 1, at);
  one[0] = (one[0] ?? 0) ^ 0xff;
  await fh.write(one, 0, 1, at);
  await fh.close();
  assert.ok(log.includes('put 2'), 'part 2 went up during the encode, with the old byte');
  await s.finish();
  assert.ok((await s3.get(bucket, 'out/b.mp4')).body.equals(await readFile(file)), 'the object has the new byte');
});

test('a file whose layout is not ftyp/free/mdat is left to the plain upload, and no upload is left open', async () => {
  const file = path.join(dir, 'c.bin');
  await writeFile(file, Buffer.alloc(1 << 20, 1));
  const log: string[] = [];
  const s = new StreamedMp4({
    parts: smallParts(log),
    key: 'out/c.bin',
    file,
    put: { contentType: 'video/mp4', signal },
  });
  s.poll(() => undefined);
  await sleep(10);
  assert.equal(await s.finish(), undefined);
  assert.deepEqual(log, []);
  assert.ok(!(await s3.keys(bucket)).includes('out/c.bin'));
});

test('a job that fails after parts went up frees them: the upload is aborted and no object appears', async () => {
  const file = path.join(dir, 'd.mp4');
  const log: string[] = [];
  const s = new StreamedMp4({
    parts: smallParts(log),
    key: 'out/d.mp4',
    file,
    put: { contentType: 'video/mp4', signal },
  });
  await encodeSlowly(file, () => s.poll(() => undefined));
  assert.ok(log.includes('put 2'));
  await s.abandon();
  assert.equal(log.at(-1), 'abort');
  assert.ok(!(await s3.keys(bucket)).includes('out/d.mp4'));
});
