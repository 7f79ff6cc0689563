import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {
  CreateBucketCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { Sha256 } from '@aws-crypto/sha256-js';
import { SignatureV4 } from '@smithy/signature-v4';
import { createRequire } from 'node:module';
import { createHash } from 'node:crypto';

// s3rver ships no type declarations: the little of it used here, typed by hand.
interface S3rverServer {
  run(): Promise<AddressInfo>;
  close(): Promise<void>;
}
type S3rverCtor = new (opts: { port: number; address: string; silent: boolean; directory: string }) => S3rverServer;
const S3rver = createRequire(import.meta.url)('s3rver') as S3rverCtor;

// A real S3-protocol server for tests: s3rver on 127.0.0.1:0 behind a proxy that checks
// SigV4 signatures (s3rver does not), so a wrong secret is refused as AWS would refuse it.
// The proxy also answers what s3rver lacks of multipart uploads, from the parts it saw go
// through: ListParts and AbortMultipartUpload; and with `minPartBytes` it refuses
// CompleteMultipartUpload with EntityTooSmall when a part but the last is smaller, as S3
// (5 MiB) and MinIO do and s3rver does not.
// With MEDIAPLANE_TEST_S3_ENDPOINT (+ _ACCESS_KEY_ID, _SECRET_ACCESS_KEY, _REGION) the
// same tests run against MinIO or AWS instead.

export interface TestS3 {
  endpoint: string;
  region: string;
  credentials: { accessKeyId: string; secretAccessKey: string };
  client: S3Client;
  createBucket(name?: string): Promise<string>;
  keys(bucket: string): Promise<string[]>;
  get(bucket: string, key: string): Promise<{ body: Buffer; contentType: string | undefined }>;
  head(bucket: string, key: string): Promise<{ contentType: string | undefined; size: number }>;
  put(bucket: string, key: string, body: Buffer | string): Promise<void>;
  close(): Promise<void>;
}

/** The built-in store's settings for `bucket` of `s3`, objects under `prefix`. */
export function storeSettings(s3: TestS3, bucket: string, prefix = 'media') {
  return {
    storeUrl: `s3://${bucket}/${prefix}`,
    storeEndpoint: s3.endpoint,
    storeRegion: s3.region,
    storeAccessKeyId: s3.credentials.accessKeyId,
    storeSecretAccessKey: s3.credentials.secretAccessKey,
  };
}

/** S3's smallest part but the last (https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html). */
export const S3_MIN_PART_BYTES = 5 * 1024 * 1024;

/**
 * `verify: false` leaves out the signature-checking proxy: s3rver alone, for the benchmark,
 * where the proxy's extra copy of every byte would count against the pipeline it measures.
 * Without the proxy there is no ListParts, so a built-in store there cannot stage uploads.
 * `minPartBytes` (S3_MIN_PART_BYTES as S3 has it) is enforced on completing a multipart upload.
 */
export async function startS3(opts: { verify?: boolean; minPartBytes?: number } = {}): Promise<TestS3> {
  const external = process.env.MEDIAPLANE_TEST_S3_ENDPOINT;
  if (external) {
    const credentials = {
      accessKeyId: process.env.MEDIAPLANE_TEST_S3_ACCESS_KEY_ID ?? 'minioadmin',
      secretAccessKey: process.env.MEDIAPLANE_TEST_S3_SECRET_ACCESS_KEY ?? 'minioadmin',
    };
    return wrap(external, process.env.MEDIAPLANE_TEST_S3_REGION ?? 'us-east-1', credentials, async () => undefined);
  }
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mp-s3rver-'));
  const server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: dir });
  const addr = await server.run();
  const credentials = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };
  const stopServer = async (): Promise<void> => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  };
  if (opts.verify === false) return wrap(`http://127.0.0.1:${addr.port}`, 'us-east-1', credentials, stopServer);
  const proxy = await startVerifyingProxy(addr.port, credentials, new Multiparts(opts.minPartBytes ?? 0));
  const proxyPort = (proxy.address() as AddressInfo).port;
  return wrap(`http://127.0.0.1:${proxyPort}`, 'us-east-1', credentials, async () => {
    proxy.closeAllConnections();
    await new Promise<void>((r) => proxy.close(() => r()));
    await stopServer();
  });
}

function wrap(endpoint: string, region: string, credentials: TestS3['credentials'], stop: () => Promise<void>): TestS3 {
  const client = new S3Client({
    endpoint,
    region,
    credentials,
    forcePathStyle: true,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  let n = 0;
  return {
    endpoint,
    region,
    credentials,
    client,
    async createBucket(name) {
      const bucket = name ?? `mp-test-${process.pid}-${Date.now().toString(36)}-${n++}`;
      await client.send(new CreateBucketCommand({ Bucket: bucket }));
      return bucket;
    },
    async keys(bucket) {
      const out: string[] = [];
      let token: string | undefined;
      do {
        const res = await client.send(new ListObjectsV2Command({ Bucket: bucket, ContinuationToken: token }));
        out.push(...(res.Contents ?? []).map((c) => c.Key ?? ''));
        token = res.NextContinuationToken;
      } while (token);
      return out.sort();
    },
    async get(bucket, key) {
      const res = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      const bytes = await res.Body?.transformToByteArray();
      return { body: Buffer.from(bytes ?? []), contentType: res.ContentType };
    },
    async head(bucket, key) {
      const res = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
      return { contentType: res.ContentType, size: res.ContentLength ?? 0 };
    },
    async put(bucket, key, body) {
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }));
    },
    async close() {
      client.destroy();
      await stop();
    },
  };
}

async function buffer(req: http.IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** Re-signs each request with the known secret and compares signatures before forwarding. */
async function startVerifyingProxy(
  upstreamPort: number,
  creds: { accessKeyId: string; secretAccessKey: string },
  multiparts: Multiparts,
): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    void verify(req, creds).then(async (problem) => {
      if (problem) {
        req.resume();
        return s3Error(res, 403, problem, problem);
      }
      const forward = (): http.ClientRequest => {
        const up = http.request(
          { host: '127.0.0.1', port: upstreamPort, method: req.method, path: req.url, headers: req.headers },
          (ur) => void multiparts.relay(req, ur, res),
        );
        up.on('error', () => res.destroy());
        return up;
      };
      const answered = await multiparts.answer(req, res);
      if (answered === true) return;
      const claimed = String(req.headers['x-amz-content-sha256'] ?? '');
      if (!/^[0-9a-f]{64}$/.test(claimed)) return void (answered ? forward().end(answered) : req.pipe(forward()));
      // A signed payload hash is checked against the bytes, as S3 does (XAmzContentSHA256Mismatch).
      void (answered ? Promise.resolve(answered) : buffer(req)).then((body) => {
        if (createHash('sha256').update(body).digest('hex') === claimed) return void forward().end(body);
        res.writeHead(400, { 'content-type': 'application/xml' });
        res.end(
          '<?xml version="1.0" encoding="UTF-8"?><Error><Code>XAmzContentSHA256Mismatch</Code><Message>The provided x-amz-content-sha256 header does not match what was computed.</Message></Error>',
        );
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return server;
}

async function verify(
  req: http.IncomingMessage,
  creds: { accessKeyId: string; secretAccessKey: string },
): Promise<string | null> {
  const auth = req.headers.authorization ?? '';
  const m =
    /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/s3\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]+)$/.exec(
      auth,
    );
  if (!m) return 'AccessDenied';
  const [, keyId, , region, signedHeaders, signature] = m;
  if (keyId !== creds.accessKeyId) return 'InvalidAccessKeyId';
  const url = new URL(req.url ?? '/', 'http://x');
  const query: Record<string, string | string[]> = {};
  for (const [k, v] of url.searchParams) {
    const prev = query[k];
    query[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  const headers: Record<string, string> = {};
  for (const h of (signedHeaders ?? '').split(';')) {
    const v = req.headers[h];
    if (v !== undefined) headers[h] = Array.isArray(v) ? v.join(',') : v;
  }
  const amzDate = String(req.headers['x-amz-date'] ?? '');
  const date = new Date(amzDate.replace(/^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/, '$1-$2-$3T$4:$5:$6Z'));
  const signer = new SignatureV4({
    credentials: creds,
    region: region ?? 'us-east-1',
    service: 's3',
    sha256: Sha256,
    uriEscapePath: false,
    applyChecksum: false,
  });
  const [hostname, port] = (req.headers.host ?? '').split(':');
  const signed = await signer.sign(
    {
      method: req.method ?? 'GET',
      protocol: 'http:',
      hostname: hostname ?? '',
      ...(port ? { port: Number(port) } : {}),
      path: url.pathname,
      query,
      headers,
    },
    { signingDate: date },
  );
  const got = /Signature=([0-9a-f]+)/.exec(
    String(signed.headers.authorization ?? signed.headers.Authorization ?? ''),
  )?.[1];
  return got === signature ? null : 'SignatureDoesNotMatch';
}

function s3Error(res: http.ServerResponse, status: number, code: string, message: string): void {
  res.writeHead(status, { 'content-type': 'application/xml' });
  res.end(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${message}</Message></Error>`);
}

const xmlEscape = (text: string): string => text.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');

/**
 * The multipart uploads seen going through the proxy, by upload id: what s3rver does not
 * answer itself (ListParts, AbortMultipartUpload) is answered from them, and S3's minimum
 * part size is enforced on completion.
 */
class Multiparts {
  readonly #uploads = new Map<string, Map<number, { size: number; etag: string }>>();
  readonly #minPartBytes: number;

  constructor(minPartBytes: number) {
    this.#minPartBytes = minPartBytes;
  }

  /**
   * Answers the request itself when s3rver cannot (true), or checks it before it goes on: then
   * the body, when it had to be read for that, or undefined.
   */
  async answer(req: http.IncomingMessage, res: http.ServerResponse): Promise<true | Buffer | undefined> {
    const url = new URL(req.url ?? '/', 'http://x');
    const uploadId = url.searchParams.get('uploadId');
    if (uploadId === null) return undefined;
    const parts = this.#uploads.get(uploadId);
    if (req.method === 'GET' || req.method === 'DELETE') {
      req.resume();
      if (!parts) s3Error(res, 404, 'NoSuchUpload', 'The specified upload does not exist.');
      else if (req.method === 'DELETE') {
        this.#uploads.delete(uploadId);
        res.writeHead(204).end();
      } else this.#listParts(res, url, uploadId, parts);
      return true;
    }
    if (req.method === 'POST' && this.#minPartBytes > 0 && parts) return this.#checkSizes(req, res, parts);
    return undefined;
  }

  /** Passes s3rver's answer on, learning the upload ids it creates and the parts it takes. */
  async relay(req: http.IncomingMessage, upstream: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    const ok = (upstream.statusCode ?? 500) < 300;
    if (ok && req.method === 'POST' && url.searchParams.has('uploads')) {
      const body = await buffer(upstream);
      const id = /<UploadId>([^<]+)<\/UploadId>/.exec(body.toString())?.[1];
      if (id) this.#uploads.set(id, new Map());
      res.writeHead(upstream.statusCode ?? 200, upstream.headers);
      return void res.end(body);
    }
    const uploadId = url.searchParams.get('uploadId');
    const parts = uploadId === null ? undefined : this.#uploads.get(uploadId);
    if (ok && parts && req.method === 'PUT') {
      const size = Number(req.headers['x-amz-decoded-content-length'] ?? req.headers['content-length'] ?? 0);
      parts.set(Number(url.searchParams.get('partNumber')), { size, etag: String(upstream.headers.etag ?? '') });
    }
    if (ok && uploadId !== null && req.method === 'POST') this.#uploads.delete(uploadId);
    res.writeHead(upstream.statusCode ?? 502, upstream.headers);
    upstream.pipe(res);
  }

  #listParts(
    res: http.ServerResponse,
    url: URL,
    uploadId: string,
    parts: Map<number, { size: number; etag: string }>,
  ): void {
    const marker = Number(url.searchParams.get('part-number-marker') ?? 0);
    const listed = [...parts].filter(([n]) => n > marker).sort((a, b) => a[0] - b[0]);
    const xml = listed
      .map(
        ([n, p]) =>
          `<Part><PartNumber>${n}</PartNumber><LastModified>${new Date().toISOString()}</LastModified><ETag>${xmlEscape(p.etag)}</ETag><Size>${p.size}</Size></Part>`,
      )
      .join('');
    res.writeHead(200, { 'content-type': 'application/xml' });
    res.end(
      `<?xml version="1.0" encoding="UTF-8"?><ListPartsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><UploadId>${uploadId}</UploadId><PartNumberMarker>${marker}</PartNumberMarker><MaxParts>1000</MaxParts><IsTruncated>false</IsTruncated>${xml}</ListPartsResult>`,
    );
  }

  /** EntityTooSmall (400) for a part but the last under the minimum (true); else the body read, to go on. */
  async #checkSizes(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    parts: Map<number, { size: number; etag: string }>,
  ): Promise<true | Buffer> {
    const body = await buffer(req);
    const numbers = [...body.toString().matchAll(/<PartNumber>(\d+)<\/PartNumber>/g)].map((m) => Number(m[1]));
    const small = numbers.slice(0, -1).find((n) => (parts.get(n)?.size ?? 0) < this.#minPartBytes);
    if (small !== undefined) {
      s3Error(
        res,
        400,
        'EntityTooSmall',
        `Your proposed upload is smaller than the minimum allowed object size (part ${small}).`,
      );
      return true;
    }
    return body;
  }
}
