import { Type, type Static } from '@sinclair/typebox';
import {
  ASSET_PHASES,
  assetPlaylistKey,
  assetSourceKey,
  ProcessingSpec,
  type AssetOutput,
  type AssetRow,
  type AssetSource,
} from '../../assets/index.ts';
import { ERROR_MESSAGE } from '../../lib/schema-errors.ts';
import { mediaUrl, type PublicBase } from '../public-base.ts';
import { PLAYABLE_AT } from './task.ts';
import { CreatorId, Profile } from './transcode.ts';

// The wire contract of assets and playback (spec/API.md section C, issue #27), at the API's
// edge: the bodies of POST /api/asset/request-upload, POST /api/asset/upload/url and PATCH
// /api/asset/{id}, and the Asset and the playback info as the `livepeer` SDK parses them
// (its models components/asset.ts and playbackinfo.ts: zod enums, strict). The SDK sends
// every field of its payloads (newassetpayload.ts, newassetfromurlpayload.ts,
// assetpatchpayload.ts) only when the caller sets it; the fields of another feature
// (`storage` for IPFS export, `encryption`) are unknown properties here, a 422 naming them.

/**
 * `public` (the default) or `jwt` (issue #28: every file of the asset needs a JWT signed by one
 * of the owner's signing keys; api/media-access.ts). `webhook` (a playback gate that calls the
 * owner's webhook) is refused rather than stored: stored, it would have to refuse every viewer.
 */
export const PlaybackPolicy = Type.Object(
  {
    type: Type.Union([Type.Literal('public'), Type.Literal('jwt')], {
      description:
        '`public`: anyone with the playbackId plays the asset. `jwt`: its playlists and files need a JWT signed by one of your signing keys (POST /api/access-control/signing-key), as ?jwt= or the Livepeer-Jwt header.',
      [ERROR_MESSAGE]: 'must be "public" or "jwt" (webhook playback policies are not supported on this server)',
    }),
    webhookId: Type.Optional(Type.String({ maxLength: 256 })),
    webhookContext: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    refreshInterval: Type.Optional(Type.Number({ minimum: 0 })),
    allowedOrigins: Type.Optional(Type.Array(Type.String({ maxLength: 2048 }), { maxItems: 100 })),
  },
  { additionalProperties: false },
);

const AssetName = Type.String({
  minLength: 1,
  maxLength: 512,
  description: 'A title for the asset; not necessarily the file name.',
});

/**
 * What the two create routes take besides the name (and the URL): the asset's processing spec
 * (assets/processing.ts, the one schema its task and handler use too) with the request's own
 * ladder (a Profile's bounds, null for the default ladder), and the asset's own fields.
 */
const assetOptions = {
  ...ProcessingSpec.properties,
  playbackPolicy: Type.Optional(Type.Union([PlaybackPolicy, Type.Null()])),
  profiles: Type.Optional(
    Type.Union([Type.Array(Profile, { minItems: 1, maxItems: 10 }), Type.Null()], {
      description:
        'The ladder, as in POST /api/transcode; absent or null: the default ladder. HLS (TS) is always written, so AV1 and VP9 are refused.',
    }),
  ),
  creatorId: Type.Optional(CreatorId),
};

export const RequestUploadBody = Type.Object({ name: AssetName, ...assetOptions }, { additionalProperties: false });
export type RequestUploadBody = Static<typeof RequestUploadBody>;

export const UploadUrlBody = Type.Object(
  {
    name: AssetName,
    url: Type.String({
      minLength: 1,
      maxLength: 4096,
      description: "The video to fetch: the rules of POST /api/transcode's input.url (https, http, ipfs://, ar://).",
    }),
    ...assetOptions,
  },
  { additionalProperties: false },
);
export type UploadUrlBody = Static<typeof UploadUrlBody>;

export const AssetPatchBody = Type.Object(
  {
    name: Type.Optional(AssetName),
    playbackPolicy: Type.Optional(Type.Union([PlaybackPolicy, Type.Null()])),
  },
  { additionalProperties: false },
);
export type AssetPatchBody = Static<typeof AssetPatchBody>;

const ms = { description: 'ms since the epoch' };
// The answers, for the OpenAPI document and the serializer: open objects (the renderers below
// build them), so no field the SDK reads is dropped.
const Open = { additionalProperties: true };

export const AssetSchema = Type.Object(
  {
    id: Type.String(),
    type: Type.Union([Type.Literal('video'), Type.Literal('audio')]),
    playbackId: Type.String(),
    playbackUrl: Type.Optional(
      Type.String({
        description:
          'The HLS master playlist, once the asset is ready, or while it is processing once `playableAt` is set.',
      }),
    ),
    playableAt: Type.Optional(Type.Number({ description: PLAYABLE_AT })),
    downloadUrl: Type.Optional(Type.String({ description: 'The file as uploaded or fetched, once ready.' })),
    name: Type.String(),
    source: Type.Object(
      {
        type: Type.Union([
          Type.Literal('url'),
          Type.Literal('directUpload'),
          Type.Literal('clip'),
          Type.Literal('recording'),
        ]),
      },
      {
        ...Open,
        description:
          "`url` (with the URL, its query left out), `directUpload`, `clip`, or `recording` (a live session's, with its `sessionId`: the asset has the session's id).",
      },
    ),
    createdAt: Type.Number(ms),
    status: Type.Object(
      {
        phase: Type.Union(ASSET_PHASES.map((p) => Type.Literal(p))),
        updatedAt: Type.Number(ms),
        progress: Type.Optional(Type.Number({ description: 'While processing, 0 to 1.' })),
        errorMessage: Type.Optional(Type.String()),
      },
      Open,
    ),
    videoSpec: Type.Optional(
      Type.Object({ format: Type.Optional(Type.String()), duration: Type.Optional(Type.Number()) }, Open),
    ),
    size: Type.Optional(Type.Number({ description: 'Bytes of the source file.' })),
    hash: Type.Optional(Type.Array(Type.Object({ hash: Type.String(), algorithm: Type.String() }))),
    playbackPolicy: Type.Optional(Type.Object({ type: Type.String() }, Open)),
    projectId: Type.String(),
    creatorId: Type.Optional(Type.Object({ type: Type.Literal('unverified'), value: Type.String() })),
    profiles: Type.Optional(Type.Array(Type.Object({}, Open))),
    storage: Type.Optional(
      Type.Object(
        { ipfs: Type.Optional(Type.Object({ cid: Type.Optional(Type.String()) }, Open)) },
        { ...Open, description: "After an export to IPFS: its CID and URLs (`ipfs`), and the export's `status`." },
      ),
    ),
  },
  Open,
);

export const PlaybackInfoSchema = Type.Object({
  type: Type.Union([Type.Literal('vod'), Type.Literal('live'), Type.Literal('recording')], {
    description:
      "`vod` for an asset, `recording` for a live session's recording (an asset too), `live` for a stream (live or not: meta.live says).",
  }),
  meta: Type.Object(
    {
      live: Type.Optional(
        Type.Union([Type.Literal(0), Type.Literal(1)], { description: "A stream's: 1 while it is live, else 0." }),
      ),
      playbackPolicy: Type.Optional(Type.Object({ type: Type.String() }, Open)),
      source: Type.Array(
        Type.Object(
          {
            hrn: Type.String({ description: 'HLS (TS), MP4, Thumbnails or Thumbnail (JPEG)' }),
            type: Type.String(),
            url: Type.String(),
            size: Type.Optional(Type.Number()),
            width: Type.Optional(Type.Number()),
            height: Type.Optional(Type.Number()),
            bitrate: Type.Optional(Type.Number()),
          },
          Open,
        ),
      ),
    },
    Open,
  ),
});

/** The Asset as Livepeer's SDK parses it (components/asset.ts). */
export interface WireAsset {
  id: string;
  type: 'video' | 'audio';
  playbackId: string;
  playbackUrl?: string;
  /** An extension of Livepeer's Asset (its SDK drops unknown fields): see PLAYABLE_AT. */
  playableAt?: number;
  downloadUrl?: string;
  name: string;
  source: AssetSource;
  createdAt: number;
  status: { phase: AssetRow['phase']; updatedAt: number; progress?: number; errorMessage?: string };
  videoSpec?: AssetOutput['videoSpec'];
  size?: number;
  hash?: { hash: string; algorithm: string }[];
  playbackPolicy?: Record<string, unknown>;
  projectId: string;
  creatorId?: { type: 'unverified'; value: string };
  profiles?: unknown[];
  storage?: Record<string, unknown>;
}

/**
 * A URL as the API shows it: without its query and fragment, where a signed URL carries its
 * signature (issue #15; tasks/model.ts PARAMS_WITHOUT_SECRETS does the same in the database).
 */
export const withoutQuery = (url: string): string => url.replace(/[?#].*$/s, '');

function wireSource(s: AssetSource): AssetSource {
  if (s.type === 'url') return { type: 'url', url: withoutQuery(s.url) };
  return { ...s };
}

// Livepeer answers a creatorId given as a string as {type: 'unverified', value}, and its SDK
// accepts only that form in an Asset.
export function wireCreator(c: unknown): WireAsset['creatorId'] {
  if (typeof c === 'string') return { type: 'unverified', value: c };
  if (typeof c === 'object' && c !== null && typeof (c as { value?: unknown }).value === 'string')
    return { type: 'unverified', value: (c as { value: string }).value };
  return undefined;
}

// The SDK's track type is video or audio, nothing else: a subtitle or data track the probe
// found would make it refuse the whole Asset.
function wireVideoSpec(v: AssetOutput['videoSpec']): AssetOutput['videoSpec'] {
  const tracks = v.tracks.filter((t) => (t.type === 'video' || t.type === 'audio') && typeof t.codec === 'string');
  return { ...v, tracks };
}

/** The Asset of spec/API.md section C for a stored row; `base` makes its URLs absolute. */
export function toWireAsset(row: AssetRow, base: PublicBase): WireAsset {
  const status: WireAsset['status'] = { phase: row.phase, updatedAt: new Date(row.updated_at).getTime() };
  if (row.progress !== null && row.phase === 'processing') status.progress = row.progress;
  if (row.error_message !== null) status.errorMessage = row.error_message;
  const asset: WireAsset = {
    id: row.id,
    type: row.type,
    playbackId: row.playback_id,
    name: row.name,
    source: wireSource(row.source),
    createdAt: new Date(row.created_at).getTime(),
    status,
    projectId: row.project_id,
  };
  const out = row.output;
  if (row.phase === 'ready' && out) {
    if (out.hls) asset.playbackUrl = mediaUrl(base, out.hls.key);
    asset.downloadUrl = mediaUrl(base, out.source?.key ?? assetSourceKey(row.playback_id));
  }
  if (row.playable_at !== null) asset.playableAt = new Date(row.playable_at).getTime();
  const early = earlyPlaylistKey(row);
  if (early) asset.playbackUrl = mediaUrl(base, early);
  if (out) {
    asset.videoSpec = wireVideoSpec(out.videoSpec);
    asset.size = out.size;
    asset.hash = out.hash;
  }
  if (row.playback_policy) asset.playbackPolicy = row.playback_policy;
  const creatorId = wireCreator(row.creator_id);
  if (creatorId) asset.creatorId = creatorId;
  if (row.spec.profiles) asset.profiles = row.spec.profiles;
  // Kept in Livepeer's shape by migration 012's trigger (issue #28's IPFS export).
  if (row.storage) asset.storage = row.storage;
  return asset;
}

/** One entry of the playback info's `meta.source` (components/playbackinfo.ts: its hrn and type enums). */
export interface PlaybackSource {
  hrn: 'HLS (TS)' | 'MP4' | 'Thumbnails' | 'Thumbnail (JPEG)';
  type: 'html5/application/vnd.apple.mpegurl' | 'html5/video/mp4' | 'text/vtt' | 'image/jpeg';
  url: string;
  size?: number;
  width?: number;
  height?: number;
  bitrate?: number;
}

export interface PlaybackInfo {
  type: 'vod' | 'live' | 'recording';
  meta: { live?: 0 | 1; playbackPolicy?: Record<string, unknown>; source: PlaybackSource[] };
}

/**
 * A live session's recording as the Session and the recording.* events show it (spec/API.md
 * section D): `recordingUrl` its HLS playlist, `mp4Url` its MP4 (the recording's own file:
 * the archived source joined into one MP4, the asset's downloadUrl); none before it is ready.
 */
export function recordingUrls(
  output: Pick<AssetOutput, 'hls' | 'source'> | null | undefined,
  base: PublicBase,
): { recordingUrl?: string; mp4Url?: string } {
  if (!output?.hls) return {};
  return { recordingUrl: mediaUrl(base, output.hls.key), mp4Url: mediaUrl(base, output.source.key) };
}

/**
 * The HLS master of an asset still processing whose early playlists play (its task's
 * playable mark): EVENT playlists that grow as its pieces finish and end as the VOD ones.
 */
export function earlyPlaylistKey(row: Pick<AssetRow, 'phase' | 'playable_at' | 'playback_id'>): string | undefined {
  return row.phase === 'processing' && row.playable_at !== null ? assetPlaylistKey(row.playback_id) : undefined;
}

/**
 * The playback info of a ready asset: HLS first (what a player should pick), then the MP4s and
 * thumbnails; of a processing one that plays already (earlyPlaylistKey), its HLS alone.
 */
export function toPlaybackInfo(row: AssetRow, base: PublicBase): PlaybackInfo {
  const out = row.output;
  const source: PlaybackSource[] = [];
  const hls = out?.hls?.key ?? earlyPlaylistKey(row);
  if (hls) source.push({ hrn: 'HLS (TS)', type: 'html5/application/vnd.apple.mpegurl', url: mediaUrl(base, hls) });
  for (const mp4 of out?.mp4 ?? []) {
    const entry: PlaybackSource = { hrn: 'MP4', type: 'html5/video/mp4', url: mediaUrl(base, mp4.key) };
    for (const k of ['size', 'width', 'height', 'bitrate'] as const) {
      const v = mp4[k];
      if (v !== undefined) entry[k] = v;
    }
    source.push(entry);
  }
  if (out?.thumbnails) {
    source.push({ hrn: 'Thumbnails', type: 'text/vtt', url: mediaUrl(base, out.thumbnails.key) });
    const poster = out.thumbnails.poster;
    if (poster) source.push({ hrn: 'Thumbnail (JPEG)', type: 'image/jpeg', url: mediaUrl(base, poster) });
  }
  const info: PlaybackInfo = { type: row.source.type === 'recording' ? 'recording' : 'vod', meta: { source } };
  if (row.playback_policy) info.meta.playbackPolicy = row.playback_policy;
  return info;
}

/** An asset as the outbox keeps it (an asset event's `task` column: the row as JSON, its times ISO strings). */
export function assetOfEvent(e: { task: unknown }): AssetRow {
  const a = e.task as Omit<AssetRow, 'created_at' | 'updated_at' | 'playable_at'> & {
    created_at: string;
    updated_at: string;
    // Absent from the events written before migration 506.
    playable_at?: string | null;
  };
  const playable = a.playable_at ? new Date(a.playable_at) : null;
  return { ...a, created_at: new Date(a.created_at), updated_at: new Date(a.updated_at), playable_at: playable };
}

/** Whether an outbox event is an asset's (asset.created, ...) rather than a task's. */
export const isAssetEvent = (e: { event: string }): boolean => e.event.startsWith('asset.');
