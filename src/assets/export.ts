import { Readable, Transform } from 'node:stream';
import { Type, type Static } from '@sinclair/typebox';
import type { Config } from '../config/index.ts';
import { InputUnreadableError, StorageDeniedError, ValidationError } from '../lib/errors.ts';
import type { Resolve } from '../lib/net-guard.ts';
import type { BuiltinStore } from '../storage/builtin/index.ts';
import { type AgentSigner, type PublishOptions, publishFile } from '../storage/dweb/index.ts';
import {
  checkedHandler,
  type JobContext,
  type JobHandler,
  type TaskKey,
  type TaskRow,
  type TaskStore,
  TASK_TYPES,
} from '../tasks/index.ts';
import { sendFile } from './export-http.ts';
import { assetSourceKey } from './keys.ts';
import type { AssetStore } from './store.ts';
import type { AssetRow } from './types.ts';

// Exports (issue #28, Livepeer's `export` and `export-data` tasks). An asset's file (the
// source, what `downloadUrl` serves: Livepeer's task-runner exports the same "video" file) goes
// to a URL of its owner's (`custom`), or to IPFS (`ipfs`) through the Storacha path of issue 5
// (storage/dweb/), whose CID the asset then shows in `storage.ipfs` (the trigger of migration
// 011 moves `storage` with the task). `export-data` puts a JSON document on IPFS the same way.
//
// The proof for IPFS: the caller's own delegation (`ipfs.credentials.proof`, its space), or,
// when the request brings none (Livepeer's clients send `{ipfs: {}}`), the operator's
// MEDIAPLANE_DWEB_EXPORT_PROOF (the server's space, as Livepeer exports to its own Piñata).
// Secrets sit under `credentials` in the stored params (the proof, a custom export's headers),
// where tasks/model.ts PARAMS_WITHOUT_SECRETS drops them once the task can no longer run.

export const EXPORT_TASK_TYPE = TASK_TYPES.export;
export const EXPORT_DATA_TASK_TYPE = TASK_TYPES.exportData;

/** Where an export's IPFS proof came from, as messages about a refused one name it. */
const OWN_PROOF = 'ipfs.credentials.proof';
const SERVER_PROOF = 'MEDIAPLANE_DWEB_EXPORT_PROOF';

/** Livepeer's NFT metadata options of an IPFS export (only the `file` template: no player here). */
const IpfsSpec = {
  nftMetadataTemplate: Type.Optional(Type.Literal('file')),
  nftMetadata: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
};
const Credentials = Type.Optional(Type.Object({ proof: Type.String() }));

// The stored params of each type (what the start functions below write), checked again before
// a run (tasks/types.ts checkedHandler).
const StoredExport = Type.Object({
  assetId: Type.String(),
  playbackId: Type.String({ pattern: '^[a-z0-9]{16}$' }),
  name: Type.String(),
  contentType: Type.String(),
  custom: Type.Optional(
    Type.Object({
      url: Type.String(),
      method: Type.Union([Type.Literal('PUT'), Type.Literal('POST')]),
      credentials: Type.Optional(Type.Object({ headers: Type.Record(Type.String(), Type.String()) })),
    }),
  ),
  ipfs: Type.Optional(Type.Object({ ...IpfsSpec, credentials: Credentials })),
});
export type ExportParams = Static<typeof StoredExport>;

const StoredExportData = Type.Object({
  content: Type.Record(Type.String(), Type.Unknown()),
  type: Type.Optional(Type.String()),
  id: Type.Optional(Type.String()),
  ipfs: Type.Object({ credentials: Credentials }),
});
export type ExportDataParams = Static<typeof StoredExportData>;

/** Where an asset goes, as the API checked it. */
export type ExportTarget =
  | { custom: { url: string; method: 'PUT' | 'POST'; headers?: Record<string, string> | undefined } }
  | {
      ipfs: {
        nftMetadataTemplate?: 'file' | undefined;
        nftMetadata?: Record<string, unknown> | undefined;
        proof?: string | undefined;
      };
    };

/** What a finished export to IPFS returns; the trigger copies `ipfs` into the asset's `storage.ipfs`. */
export interface IpfsExportOutput {
  ipfs: {
    cid: string;
    url: string;
    gatewayUrl: string;
    nftMetadata?: { cid: string; url: string; gatewayUrl: string };
  };
}

interface StartCommon {
  owner: string;
  requesterId: string | null;
  maxQueuedPerOwner: number;
  /** The API key that asks: an export is one of its requests (usage per key), not one of its transcodes. */
  key?: TaskKey | undefined;
}

/** Livepeer's content type of the exported file: `video/<format>` (`audio/` for an audio asset). */
function contentTypeOf(asset: AssetRow): string {
  const format = asset.output?.videoSpec.format;
  const kind = asset.type === 'audio' ? 'audio' : 'video';
  if (format === 'mp4' || format === 'webm') return `${kind}/${format}`;
  if (format === 'mkv') return `${kind}/x-matroska`;
  return 'application/octet-stream';
}

/** Queues the export of the owner's ready asset; another owner's or a deleted one: NotFoundError. */
export async function startExport(
  d: { assets: AssetStore; tasks: TaskStore },
  s: StartCommon & { assetId: string; target: ExportTarget },
): Promise<TaskRow> {
  const asset = await d.assets.get(s.owner, s.assetId);
  // Livepeer answers 412 here; the API's errors say a state it cannot act on with a 422 (as playback does).
  if (asset.phase !== 'ready')
    throw new ValidationError(`id: the asset is not ready to be exported (it is ${asset.phase})`);
  const base = {
    assetId: asset.id,
    playbackId: asset.playback_id,
    name: asset.name,
    contentType: contentTypeOf(asset),
  };
  let params: ExportParams;
  if ('custom' in s.target) {
    const { url, method, headers } = s.target.custom;
    params = { ...base, custom: { url, method, ...(headers ? { credentials: { headers } } : {}) } };
  } else {
    const { proof, nftMetadataTemplate, nftMetadata } = s.target.ipfs;
    params = {
      ...base,
      ipfs: {
        ...(nftMetadataTemplate ? { nftMetadataTemplate } : {}),
        ...(nftMetadata ? { nftMetadata } : {}),
        ...(proof ? { credentials: { proof } } : {}),
      },
    };
  }
  return d.tasks.create({
    owner: s.owner,
    projectId: asset.project_id,
    type: EXPORT_TASK_TYPE,
    params,
    requesterId: s.requesterId,
    maxQueuedPerOwner: s.maxQueuedPerOwner,
    key: s.key,
  });
}

/** Queues a JSON document's export to IPFS (Livepeer's `exportData` params). */
export async function startExportData(
  d: { tasks: TaskStore },
  s: StartCommon & {
    projectId: string;
    content: Record<string, unknown>;
    type?: string | undefined;
    id?: string | undefined;
    proof?: string | undefined;
  },
): Promise<TaskRow> {
  const params: ExportDataParams = {
    content: s.content,
    ...(s.type === undefined ? {} : { type: s.type }),
    ...(s.id === undefined ? {} : { id: s.id }),
    ipfs: s.proof ? { credentials: { proof: s.proof } } : {},
  };
  return d.tasks.create({
    owner: s.owner,
    projectId: s.projectId,
    type: EXPORT_DATA_TASK_TYPE,
    params,
    requesterId: s.requesterId,
    maxQueuedPerOwner: s.maxQueuedPerOwner,
    key: s.key,
  });
}

export interface ExportHandlerDeps {
  config: Pick<
    Config,
    | 'allowPrivateUrls'
    | 'inputTimeoutMs'
    | 'inputIdleTimeoutMs'
    | 'dwebServiceUrl'
    | 'dwebServiceDid'
    | 'dwebReceiptsUrl'
    | 'dwebGateway'
    | 'dwebExportProof'
  >;
  store: BuiltinStore;
  /** The service's UCAN identity the proofs delegate to. */
  agent: AgentSigner;
  /** How host names resolve for the address guard (a seam for tests). */
  resolve?: Resolve;
}

/** The worker's handlers of both export task types (main.ts gives them to the worker). */
export function createExportHandlers(d: ExportHandlerDeps): Record<string, JobHandler> {
  return { [EXPORT_TASK_TYPE]: createExportHandler(d), [EXPORT_DATA_TASK_TYPE]: createExportDataHandler(d) };
}

/** The `export` job: the asset's file to the custom URL, or to IPFS. */
export function createExportHandler(
  d: ExportHandlerDeps,
): JobHandler<unknown, IpfsExportOutput | Record<string, never>> {
  return checkedHandler(StoredExport, async (p, ctx) => {
    const key = assetSourceKey(p.playbackId);
    const size = (await d.store.stat(key))?.size;
    if (size === undefined) throw new InputUnreadableError("the asset's file is gone from the store (was it deleted?)");
    if (p.custom) {
      const body = await d.store.read(key, undefined, ctx.signal);
      await sendFile({
        url: p.custom.url,
        method: p.custom.method,
        headers: p.custom.credentials?.headers ?? {},
        body,
        size,
        contentType: p.contentType,
        allowPrivate: d.config.allowPrivateUrls,
        timeoutMs: d.config.inputTimeoutMs,
        idleTimeoutMs: d.config.inputIdleTimeoutMs,
        signal: ctx.signal,
        resolve: d.resolve,
        onBytes: (n) => ctx.progress(n / Math.max(1, size)),
      });
      // Livepeer's custom export has no output of its own.
      return {};
    }
    if (!p.ipfs) throw new ValidationError('the export names neither custom nor ipfs');
    const dweb = dwebOptions(d, p.ipfs.credentials?.proof, ctx.signal);
    const file = await d.store.read(key, undefined, ctx.signal);
    const counted = countBytes(file, (n) => ctx.progress((0.95 * n) / Math.max(1, size)));
    let video: { cid: string; url: string };
    try {
      video = await publishFile(() => Readable.toWeb(counted) as ReadableStream<Uint8Array<ArrayBuffer>>, dweb);
    } finally {
      counted.destroy();
    }
    const videoUrl = `ipfs://${video.cid}`;
    const metadata = nftMetadata(p.name, videoUrl, p.ipfs.nftMetadata ?? {});
    const meta = await publishFile(() => jsonStream(metadata), dweb);
    return {
      ipfs: {
        cid: video.cid,
        url: videoUrl,
        gatewayUrl: video.url,
        nftMetadata: { cid: meta.cid, url: `ipfs://${meta.cid}`, gatewayUrl: meta.url },
      },
    };
  });
}

/** The `export-data` job: the document, serialized with its keys sorted, as one file on IPFS. */
export function createExportDataHandler(d: ExportHandlerDeps): JobHandler<unknown, { ipfs: IpfsExportOutput['ipfs'] }> {
  return checkedHandler(StoredExportData, async (p, ctx: JobContext) => {
    const file = await publishFile(() => jsonStream(p.content), dwebOptions(d, p.ipfs.credentials?.proof, ctx.signal));
    return { ipfs: { cid: file.cid, url: `ipfs://${file.cid}`, gatewayUrl: file.url } };
  });
}

/** The Storacha target: the caller's space when the task brought a proof, else the operator's. */
function dwebOptions(d: ExportHandlerDeps, own: string | undefined, signal: AbortSignal): PublishOptions {
  const proof = own ?? d.config.dwebExportProof;
  if (!proof)
    throw new StorageDeniedError(
      `${OWN_PROOF}: is required: this server has no Storacha space of its own for exports (${SERVER_PROOF} is not set)`,
    );
  return {
    proof,
    proofField: own ? OWN_PROOF : SERVER_PROOF,
    agent: d.agent,
    serviceUrl: d.config.dwebServiceUrl,
    serviceDid: d.config.dwebServiceDid,
    ...(d.config.dwebReceiptsUrl ? { receiptsUrl: d.config.dwebReceiptsUrl } : {}),
    gateway: d.config.dwebGateway,
    signal,
  };
}

/** Passes `from` through, telling `onBytes` how many bytes went so far. */
function countBytes(from: Readable, onBytes: (n: number) => void): Readable {
  let n = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      n += chunk.length;
      onBytes(n);
      done(null, chunk);
    },
  });
  from.on('error', (err) => counter.destroy(err));
  counter.on('close', () => from.destroy());
  return from.pipe(counter);
}

/**
 * JSON with every object's keys in sorted order and no spaces: the same document always has
 * the same bytes, so the same CID, whatever order it was written or stored in (the database's
 * jsonb keeps keys in an order of its own).
 */
export function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((v) => stableJson(v ?? null)).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${stableJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

const jsonStream = (value: unknown): ReadableStream<Uint8Array<ArrayBuffer>> =>
  Readable.toWeb(Readable.from([Buffer.from(stableJson(value))])) as ReadableStream<Uint8Array<ArrayBuffer>>;

/**
 * Livepeer's NFT metadata of the `file` template (ERC-721 style: the video as `animation_url`),
 * with the owner's `nftMetadata` merged in: a null removes a key, an object merges into one.
 */
function nftMetadata(name: string, videoUrl: string, overrides: Record<string, unknown>): Record<string, unknown> {
  const base: Record<string, unknown> = {
    name,
    description: `Video from asset ${JSON.stringify(name)}`,
    animation_url: videoUrl,
    properties: { video: videoUrl },
  };
  return merged(base, overrides);
}

function merged(into: Record<string, unknown>, from: Record<string, unknown>): Record<string, unknown> {
  const out = { ...into };
  for (const [k, v] of Object.entries(from)) {
    const was = out[k];
    if (v === null) delete out[k];
    else if (isObject(v) && isObject(was)) out[k] = merged(was, v);
    else out[k] = v;
  }
  return out;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
