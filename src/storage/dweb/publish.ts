import { createReadStream } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { Readable } from 'node:stream';
import { create as createClient } from '@storacha/client';
import { StoreMemory } from '@storacha/client/stores/memory';
import * as Service from '@storacha/client/service';
import { DID } from '@ucanto/core';
import { CancelledError, StorageDeniedError, UpstreamUnavailableError } from '../../lib/errors.ts';
import type { PublishedFile } from '../types.ts';
import type { AgentSigner } from './agent.ts';
import { validateDwebProof } from './proof.ts';

// Publishes a finished output folder as one UnixFS directory with @storacha/client's
// uploadDirectory (issue 5): the client shards it into CARs, stores each with space/blob/add,
// registers the index (space/index/add) and the upload (upload/add). A fresh client per
// publish, with an in-memory store holding only this caller's delegation, so one caller's
// proof can never be used for another caller's upload.

export interface PublishOptions {
  /** The caller's base64 delegation (never logged, never put in an error). */
  proof: string;
  agent: AgentSigner;
  serviceUrl: string;
  serviceDid: string;
  /** Where receipts are polled; `<serviceUrl>/receipt/` when absent. */
  receiptsUrl?: string;
  /** Gateway for the per-file URLs, path style: `<gateway>/ipfs/<root>/<path>`. */
  gateway: string;
  signal?: AbortSignal;
  /** Where the caller put the proof, for the messages of a refused one (`storage.credentials.proof`). */
  proofField?: string;
}

export type { PublishedFile } from '../types.ts';

export interface PublishResult {
  rootCid: string;
  files: PublishedFile[];
}

async function listFiles(dir: string): Promise<{ path: string; abs: string; size: number }[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  const files = entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
  const out = await Promise.all(
    files.map(async (abs) => ({ abs, path: relative(dir, abs).split(sep).join('/'), size: (await stat(abs)).size })),
  );
  return out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

export function gatewayUrl(gateway: string, rootCid: string, path: string): string {
  const encoded = path.split('/').map(encodeURIComponent).join('/');
  return `${gateway.replace(/\/+$/, '')}/ipfs/${rootCid}/${encoded}`;
}

/** A fresh client whose store holds only this caller's delegation, its space the current one. */
async function connect(opts: PublishOptions) {
  const checked = await validateDwebProof(opts.proof, {
    agentDid: opts.agent.did(),
    ...(opts.proofField ? { field: opts.proofField } : {}),
  });
  const serviceUrl = new URL(opts.serviceUrl);
  // One service answers access, upload and filecoin invocations (as the public one does).
  const at = { id: DID.parse(opts.serviceDid), url: serviceUrl };
  const client = await createClient({
    principal: opts.agent,
    store: new StoreMemory(),
    serviceConf: {
      access: Service.accessServiceConnection(at),
      upload: Service.uploadServiceConnection(at),
      filecoin: Service.filecoinServiceConnection(at),
      gateway: Service.gatewayServiceConnection(at),
    },
    receiptsEndpoint: new URL(opts.receiptsUrl ?? new URL('/receipt/', serviceUrl).toString()),
  });
  await client.addSpace(checked.delegation);
  await client.setCurrentSpace(checked.space);
  return { client, checked };
}

export async function publishDirectory(dir: string, opts: PublishOptions): Promise<PublishResult> {
  const { client, checked } = await connect(opts);
  const files = await listFiles(dir);
  const cids = new Map<string, string>();
  // `size` is left out on purpose: the client then streams the directory through its
  // sharding encoder instead of encoding the whole tree in memory first. File streams yield
  // ArrayBuffer-backed chunks (never shared memory), as the DOM's ReadableStream type asks
  // where the console's type check reads these files through the API contract.
  const fileLikes = files.map((f) => ({
    name: f.path,
    stream: () => Readable.toWeb(createReadStream(f.abs)) as ReadableStream<Uint8Array<ArrayBuffer>>,
  }));
  let root: { toString(): string };
  try {
    root = await client.uploadDirectory(fileLikes, {
      ...(opts.signal ? { signal: opts.signal } : {}),
      onDirectoryEntryLink: (link: { name: string; cid: { toString(): string } }) => {
        cids.set(link.name, link.cid.toString());
      },
      // Without filecoin/offer in the delegation the client must not invoke it (it would be refused).
      ...(checked.canOfferFilecoin ? {} : { pieceHasher: null as never }),
    });
  } catch (err) {
    throw classify(err, opts.signal);
  }
  const rootCid = root.toString();
  return {
    rootCid,
    files: files.map((f) => ({
      path: f.path,
      cid: cids.get(f.path) ?? '',
      size: f.size,
      url: gatewayUrl(opts.gateway, rootCid, f.path),
    })),
  };
}

/**
 * Publishes one file as a UnixFS file with no directory around it, so that its CID is the
 * file's own and `ipfs://<cid>` is the file (an asset's export, issue #28). `stream` is read
 * once, streamed through the client's sharding encoder (no `size` given, as above).
 */
export async function publishFile(
  stream: () => ReadableStream<Uint8Array<ArrayBuffer>>,
  opts: PublishOptions,
): Promise<{ cid: string; url: string }> {
  const { client, checked } = await connect(opts);
  let root: { toString(): string };
  try {
    root = await client.uploadFile(
      { stream },
      {
        ...(opts.signal ? { signal: opts.signal } : {}),
        ...(checked.canOfferFilecoin ? {} : { pieceHasher: null as never }),
      },
    );
  } catch (err) {
    throw classify(err, opts.signal);
  }
  const cid = root.toString();
  return { cid, url: `${opts.gateway.replace(/\/+$/, '')}/ipfs/${cid}` };
}

/** Maps a client failure to our error family; the message never carries the proof. */
function classify(err: unknown, signal: AbortSignal | undefined): Error {
  if (signal?.aborted) return new CancelledError();
  const text = describe(err);
  if (
    /Unauthorized|not authorized|InsufficientStorage|not provisioned|no storage provider|Claim.*not authorized|expired|revoked/i.test(
      text,
    )
  ) {
    return new StorageDeniedError(`dweb.storage: the upload service refused the upload: ${text}`, { cause: err });
  }
  return new UpstreamUnavailableError(`dweb.storage: the upload to the upload service failed: ${text}`, { cause: err });
}

function describe(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err, i = 0; e && i < 4; e = (e as { cause?: unknown }).cause, i++) {
    const msg = e instanceof Error ? e.message : typeof e === 'object' ? JSON.stringify(e).slice(0, 300) : String(e);
    if (msg && !parts.includes(msg)) parts.push(msg);
  }
  // A message is at most a few lines; a UCAN in base64 never belongs in it.
  return parts
    .join(': ')
    .replace(/[A-Za-z0-9+/=_-]{200,}/g, '[…]')
    .slice(0, 600);
}
