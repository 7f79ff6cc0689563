// Helpers of the upload tests (test/api/uploads.test.ts, upload-restart.test.ts): an upload
// URL pair from POST /api/asset/request-upload, tus-js-client as a promise, raw HTTP requests
// (chunked bodies, answers that come before the body is sent), big test videos.

import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { request } from 'node:http';
import { promisify } from 'node:util';
import { Upload, type UploadOptions } from 'tus-js-client';
import type { UploadGrant } from '../../src/assets/index.ts';
import { cachedMedia } from './media-cache.ts';

/** Numbered upload grants of alice's, each valid for `expiresInMs` from now (an hour by default). */
export function uploadGrants(): (expiresInMs?: number) => UploadGrant {
  let n = 0;
  return (expiresInMs = 3600_000) => {
    n++;
    return {
      assetId: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
      playbackId: `pb${n}`,
      taskId: `task-${n}`,
      owner: 'alice',
      expiresAt: new Date(Date.now() + expiresInMs),
    };
  };
}

export interface UploadUrls {
  url: string;
  tusEndpoint: string;
  token: string;
  asset: { id: string; playbackId: string; status: { phase: string } };
}

/** POST /api/asset/request-upload at `base` with `key`. */
export async function requestUpload(base: string, key: string, name = 'upload test'): Promise<UploadUrls> {
  const res = await fetch(`${base}/api/asset/request-upload`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name }),
  });
  const body = (await res.json()) as Omit<UploadUrls, 'token'>;
  if (res.status !== 200) throw new Error(`request-upload answered ${res.status}: ${JSON.stringify(body)}`);
  return { ...body, token: new URL(body.url).searchParams.get('token') ?? '' };
}

/** Uploads `file` (a Buffer or a file's path) with tus-js-client; resolves with the upload's URL. */
export function tusUpload(
  endpoint: string,
  file: Buffer | string,
  o: Partial<UploadOptions> = {},
): Promise<{ url: string; upload: Upload }> {
  return new Promise((resolve, reject) => {
    const source = typeof file === 'string' ? createReadStream(file) : file;
    const upload: Upload = new Upload(source, {
      endpoint,
      retryDelays: [0, 200, 500, 1000],
      metadata: { filename: 'video.mp4', filetype: 'video/mp4' },
      ...o,
      onError: reject,
      onSuccess: () => resolve({ url: upload.url ?? '', upload }),
    });
    upload.start();
  });
}

export interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/**
 * One request with node:http, the body written in `chunks` (chunked encoding unless a
 * Content-Length is given); resolves as soon as the answer is in, even if the server answered
 * before the body was all sent (an early 413), and rejects only when no answer came.
 */
export function rawRequest(
  url: string,
  o: { method: string; headers?: Record<string, string>; chunks?: Iterable<Buffer> },
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: o.method, headers: o.headers ?? {} }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        body += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    const chunks = o.chunks ? [...o.chunks] : [];
    const next = () => {
      const c = chunks.shift();
      if (c === undefined) return void req.end();
      if (req.destroyed) return;
      if (req.write(c)) setImmediate(next);
      else req.once('drain', next);
    };
    next();
  });
}

/** `n` chunks of `size` bytes. */
export function* chunksOf(n: number, size: number, byte = 0x61): Generator<Buffer> {
  for (let i = 0; i < n; i++) yield Buffer.alloc(size, byte);
}

export const sha256 = (data: Buffer): string => createHash('sha256').update(data).digest('hex');

/** The sha256 of a file, streamed. */
export async function sha256File(file: string): Promise<string> {
  const h = createHash('sha256');
  for await (const c of createReadStream(file)) h.update(c as Buffer);
  return h.digest('hex');
}

/**
 * A real video of about `mb` megabytes (320x240, lossless x264 of a noisy picture: big for its
 * length, so processing it stays quick), made once per run like helpers/media.ts's clips.
 */
export function bigVideo(mb: number): Promise<string> {
  // About 4 MB a second of this picture.
  const seconds = Math.max(1, Math.round(mb / 4));
  return cachedMedia(`big-${mb}mb.mp4`, async (tmp) => {
    await promisify(execFile)('ffmpeg', [
      ...['-v', 'error', '-y', '-f', 'lavfi', '-i', 'testsrc2=size=320x240:rate=30'],
      ...['-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000', '-t', String(seconds)],
      ...['-vf', 'noise=alls=40:allf=t', '-c:v', 'libx264', '-preset', 'ultrafast', '-qp', '0', '-pix_fmt', 'yuv420p'],
      ...['-c:a', 'aac', '-b:a', '96k', tmp],
    ]);
  });
}
