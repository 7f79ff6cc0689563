import { webcrypto } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { S3Client } from '@aws-sdk/client-s3';
import { guardedLookup, hostProblem, privateAddressError, type Resolve, withAllowHint } from '../lib/net-guard.ts';
import type { S3Location } from './types.ts';

export interface S3ClientOptions {
  maxAttempts: number;
  /** Whether the endpoint may be a loopback or private address (MEDIAPLANE_ALLOW_PRIVATE_URLS). */
  allowPrivate: boolean;
  /** How the endpoint's host name is resolved; a seam for tests (DNS rebinding, issue #15). */
  resolve?: Resolve | undefined;
}

/**
 * A client for one caller's bucket. Path-style addressing because self-hosted S3 servers
 * (MinIO, Ceph, s3rver) rarely have wildcard DNS for virtual-host buckets. The SDK retries
 * 5xx, throttling and network errors itself, up to maxAttempts, with backoff; an address
 * refused at connect time (PrivateAddressError) is none of those, so it is not retried.
 */
export function s3Client(loc: S3Location, opts: S3ClientOptions): S3Client {
  const client = new S3Client({
    endpoint: loc.endpoint,
    region: loc.region ?? 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: loc.credentials.accessKeyId, secretAccessKey: loc.credentials.secretAccessKey },
    maxAttempts: opts.maxAttempts,
    requestHandler: { connectionTimeout: 10_000, requestTimeout: 120_000, ...guardedAgents(opts) },
    // Bodies of 2 MiB and more get `Expect: 100-continue`. Given Agent options, the handler
    // sends those through fresh Agents that skip the guarded lookup; given our Agent
    // instances, it shares them, which the SDK avoids for 100-continue (crossed streams with
    // Buffer bodies, smithy-typescript#1754). Without the header neither can happen.
    expectContinueHeader: false,
    // Checksums the SDK adds by default since 2025 are not understood by every S3 server.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  client.middlewareStack.add(
    (next) => async (args) => {
      await hashPayloadOffLoop(args.request);
      return next(args);
    },
    { step: 'build', name: 'mediaplaneHashPayloadOffLoop' },
  );
  return client;
}

/**
 * The connections of a client, every one of them through the guarded lookup (issue #15):
 * the endpoint's host was checked before the client was built, but the SDK resolves it
 * again when it connects, and a name that answers a public address first and 127.0.0.1 next
 * (DNS rebinding) would reach a loopback server. Agent instances, not options: the handler
 * uses them for every request (keep-alive and 50 sockets, as the SDK's own).
 */
function guardedAgents(opts: S3ClientOptions): { httpAgent: http.Agent; httpsAgent: https.Agent } {
  const lookup: { lookup?: LookupFunction } = opts.allowPrivate ? {} : { lookup: guardedLookup(opts.resolve) };
  const agent = { keepAlive: true, maxSockets: 50, ...lookup };
  return { httpAgent: new http.Agent(agent), httpsAgent: new https.Agent(agent) };
}

const SHA256_HEADER = 'x-amz-content-sha256';
const OFF_LOOP_MIN = 64 * 1024;

/**
 * SigV4 signs the SHA-256 of a request's body. The SDK hashes a buffer body on the event loop
 * (the 47 MB of MP4s after a 30 s ladder took ~90 ms of it, while the last uploads waited);
 * WebCrypto's digest runs on the libuv thread pool, and the signer takes a hash that is already
 * in the x-amz-content-sha256 header. Small bodies are left to the SDK. Streamed bodies are
 * sent as UNSIGNED-PAYLOAD by the SDK and need no hash.
 */
async function hashPayloadOffLoop(request: unknown): Promise<void> {
  const r = request as { headers?: Record<string, string>; body?: unknown } | undefined;
  const body = r?.body;
  if (!r?.headers || !ArrayBuffer.isView(body) || body.byteLength < OFF_LOOP_MIN) return;
  if (Object.keys(r.headers).some((h) => h.toLowerCase() === SHA256_HEADER)) return;
  const digest = await webcrypto.subtle.digest('SHA-256', body);
  r.headers[SHA256_HEADER] = Buffer.from(digest).toString('hex');
}

/** Says why an endpoint may not be used, or null; endpoints are user input like URLs are. */
export async function endpointProblem(
  endpoint: string,
  opts: { allowPrivate: boolean; resolve?: Resolve | undefined },
): Promise<string | null> {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return `${JSON.stringify(endpoint)} is not a URL`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `${url.protocol} is not an http(s) endpoint`;
  const problem = await hostProblem(url, opts);
  return problem === null ? null : withAllowHint(problem);
}

/** `refused-address`: the endpoint resolved to a private address when the client connected. */
export type S3Failure = 'denied' | 'no-bucket' | 'no-key' | 'refused-address' | 'unavailable';

/** Classifies an SDK error by its HTTP status and code (never by message text). */
export function s3Failure(err: unknown): S3Failure {
  if (privateAddressError(err)) return 'refused-address';
  const e = err as { name?: string; Code?: string; $metadata?: { httpStatusCode?: number } } | null;
  const status = e?.$metadata?.httpStatusCode;
  const code = e?.Code ?? e?.name ?? '';
  if (code === 'NoSuchBucket') return 'no-bucket';
  if (code === 'NoSuchKey' || code === 'NotFound') return 'no-key';
  if (status === 403 || status === 401 || /AccessDenied|InvalidAccessKeyId|SignatureDoesNotMatch|Forbidden/.test(code))
    return 'denied';
  if (status === 404) return 'no-key';
  if (status !== undefined && status >= 400 && status < 500 && status !== 408 && status !== 429) return 'denied';
  return 'unavailable';
}
