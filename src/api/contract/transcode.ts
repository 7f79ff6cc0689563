import { Type, type Static } from '@sinclair/typebox';
import { TASK_TYPES } from '../../tasks/index.ts';
import { builtinOutputPrefix, type OutputKind, type TranscodeJob } from '../../transcode/index.ts';
import { mediaUrl, type PublicBase } from '../public-base.ts';
import type { TaskWireShape } from './task.ts';

// The wire contract of the transcoding task (spec/API.md section A), at the API's edge
// (issue #16): the body of POST /api/transcode, its redaction, and how a `transcode-file`
// Task shows its params and output. One schema gives the validation, the TypeScript type and
// the OpenAPI document. Rules that JSON Schema cannot say well (URL schemes, gateway URL
// style, private addresses) live in api/validate-transcode.ts. The domain (transcode/,
// storage/) has its own types and never imports this file.

/** The task type a transcode request becomes (spec/API.md: the Task's `type`). */
export const TRANSCODE_TASK_TYPE = TASK_TYPES.transcode;

const S3Credentials = Type.Object(
  { accessKeyId: Type.String({ minLength: 1 }), secretAccessKey: Type.String({ minLength: 1 }) },
  { additionalProperties: false },
);

export const UrlInputBody = Type.Object(
  { url: Type.String({ minLength: 1, maxLength: 4096 }) },
  { additionalProperties: false },
);

// Where an S3-compatible bucket is and how to reach it: shared by inputs and storage.
const s3Bucket = {
  type: Type.Literal('s3'),
  endpoint: Type.String({ minLength: 1, maxLength: 2048 }),
  bucket: Type.String({ minLength: 1, maxLength: 255 }),
  credentials: S3Credentials,
  region: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
};

// Path rules (api/validate-transcode.ts, lib/object-path.ts): `/`-separated segments, no `.`,
// `..` or empty segments, no backslash, `?`, `#`, `%` or control characters, at most 1,024
// bytes of UTF-8 (issue #15). maxLength counts characters, so it only bounds the schema pass.
const PATH_RULE =
  'A /-separated path of at most 1,024 bytes (UTF-8); . and .. segments, empty segments (//), backslashes, ?, #, % (percent-encoding) and control characters are refused with 422.';

export const S3InputBody = Type.Object(
  {
    ...s3Bucket,
    path: Type.String({ minLength: 1, maxLength: 1024, description: `The input object's key. ${PATH_RULE}` }),
  },
  { additionalProperties: false },
);

export const S3StorageBody = Type.Object(s3Bucket, { additionalProperties: false });

export const DwebStorageBody = Type.Object(
  {
    type: Type.Union([Type.Literal('dweb.storage'), Type.Literal('web3.storage')]),
    credentials: Type.Object(
      { proof: Type.String({ minLength: 1, maxLength: 1_000_000 }) },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);

const OutputPath = Type.Object(
  {
    path: Type.String({
      minLength: 1,
      maxLength: 1024,
      description: `The folder the outputs go under; a leading / is added when missing, one trailing / is allowed and / alone is the bucket root. ${PATH_RULE}`,
    }),
  },
  { additionalProperties: false },
);

// One field per output kind the transcode domain lists (transcode/outputs/index.ts): tsc
// refuses a kind without its field here, or a field without its kind (issue #26).
export const Outputs = Type.Object(
  {
    hls: Type.Optional(OutputPath),
    mp4: Type.Optional(OutputPath),
    fmp4: Type.Optional(OutputPath),
  } satisfies Record<OutputKind, unknown>,
  { additionalProperties: false, minProperties: 1 },
);

export const Profile = Type.Object(
  {
    name: Type.String({
      minLength: 1,
      maxLength: 64,
      pattern: '^[A-Za-z0-9_.-]+$',
      description: 'The rendition folder under each output; audio, subtitles and thumbnails are reserved (422).',
    }),
    width: Type.Integer({
      minimum: 128,
      maximum: 7680,
      description:
        'Even; width x height at most 35,651,584 pixels (8192x4352), and at most 71,303,168 pixels for all profiles together.',
    }),
    height: Type.Integer({ minimum: 128, maximum: 7680, description: 'Even; see width for the pixel bounds.' }),
    bitrate: Type.Integer({ minimum: 400, maximum: 200_000_000, description: 'Bits per second, 400 to 200,000,000.' }),
    // Issue #15: fps 0 passed `minimum: 0` (and was silently ignored), and fps 1 with fpsDen
    // 1001 cut one-frame segments 1001 s long: fps/fpsDen is held to 1..240 in validate-transcode.ts.
    fps: Type.Optional(
      Type.Number({
        minimum: 1,
        maximum: 240,
        description: 'Frame rate numerator, 1 to 240; the frame rate fps/fpsDen must be at least 1.',
      }),
    ),
    fpsDen: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 1001, description: 'Frame rate denominator, 1 to 1001 (default 1).' }),
    ),
    gop: Type.Optional(
      Type.String({
        maxLength: 32,
        description:
          'Keyframe interval in seconds as a decimal string ("2", "0.5"), from 0.001 to 60, or "intra" (every frame a keyframe, as in Livepeer).',
      }),
    ),
    profile: Type.Optional(
      Type.Union(
        (['H264Baseline', 'H264Main', 'H264High', 'H264ConstrainedHigh'] as const).map((v) => Type.Literal(v)),
      ),
    ),
    // AV1 appended: the enum's 422 message ("must be one of ...") keeps the prefix it had.
    encoder: Type.Optional(
      Type.Union(
        (['H.264', 'HEVC', 'VP8', 'VP9', 'AV1'] as const).map((v) => Type.Literal(v)),
        {
          description:
            'H.264 (libx264, the default) or HEVC (libx265) in every output; AV1 (SVT-AV1) and VP9 (libvpx) in fMP4 (HLS and DASH) and MP4 outputs only, a 422 with outputs.hls (TS segments); VP8 is refused with 422.',
        },
      ),
    ),
    quality: Type.Optional(Type.Integer({ minimum: 0, maximum: 51 })),
    perTitle: Type.Optional(
      Type.Boolean({
        description:
          "Let the per-title ladder choose this rendition's rate (capped CRF at `quality`, default 21), with `bitrate` as its cap. Default false: the profile keeps its bitrate.",
      }),
    ),
  },
  { additionalProperties: false },
);

export const CreatorId = Type.Union([
  Type.String({ minLength: 1, maxLength: 256 }),
  Type.Object(
    { type: Type.Literal('unverified'), value: Type.String({ minLength: 1, maxLength: 256 }) },
    { additionalProperties: false },
  ),
]);

export const TranscodeRequest = Type.Object(
  {
    input: Type.Union([UrlInputBody, S3InputBody]),
    storage: Type.Optional(
      Type.Union([S3StorageBody, DwebStorageBody], {
        description:
          "Where the outputs go. Absent: the service's built-in store, and each output in output.transcodeFile gets an absolute `url` beside its `path` (the livepeer SDK always sends storage).",
      }),
    ),
    outputs: Outputs,
    profiles: Type.Optional(Type.Array(Profile, { minItems: 1, maxItems: 10 })),
    // Issue #15: 1e-300 passed `exclusiveMinimum: 0` and cut one-frame segments.
    targetSegmentSizeSecs: Type.Optional(
      Type.Number({ minimum: 1, maximum: 60, description: 'Segment duration in seconds, from 1 to 60 (default 6).' }),
    ),
    c2pa: Type.Optional(Type.Boolean()),
    perTitle: Type.Optional(
      Type.Boolean({
        description:
          "The per-title ladder for the default ladder (no profiles): an analysis of the video picks each rung's rate under its fixed bitrate, and drops a rung that adds nothing; output.transcodeFile lists each rendition's chosen bitrate and why (`perTitle`: crf, cap, predictedBitrate, hitsCap, predictedSsim). With profiles it applies to those that set perTitle; false: every rung at its fixed bitrate. Default: the server's MEDIAPLANE_PER_TITLE (on).",
      }),
    ),
    creatorId: Type.Optional(CreatorId),
  },
  { additionalProperties: false },
);

export type TranscodeParams = Static<typeof TranscodeRequest>;
export type S3StorageParams = Static<typeof S3StorageBody>;
export type DwebStorageParams = Static<typeof DwebStorageBody>;

/**
 * The task the API queues for a request. Its params are the request as validated, stored as
 * JSON and handed by the worker to transcode's handler: so the request must be a
 * TranscodeJob, which tsc checks here, where the wire and the domain meet (issue #16).
 */
export function transcodeTask(params: TranscodeParams): { type: typeof TRANSCODE_TASK_TYPE; params: TranscodeJob } {
  return { type: TRANSCODE_TASK_TYPE, params };
}

/** The params as they may be shown: no secret left in them. */
export type RedactedParams = Omit<TranscodeParams, 'storage'> & {
  storage?: S3StorageParams | { type: DwebStorageParams['type'] };
};

/** The spec's credential redaction: S3 keys show as `***`, the UCAN proof is omitted. */
export function redactParams(p: TranscodeParams): RedactedParams {
  const redactS3 = <T extends { credentials: { accessKeyId: string; secretAccessKey: string } }>(x: T): T => ({
    ...x,
    credentials: { accessKeyId: '***', secretAccessKey: '***' },
  });
  const input = 'type' in p.input ? redactS3(p.input) : p.input;
  if (!p.storage) return { ...p, input };
  const storage = p.storage.type === 's3' ? redactS3(p.storage) : { type: p.storage.type };
  return { ...p, input, storage };
}

/**
 * A signed input URL carries its signature in the query (`?X-Amz-Signature=...`), a
 * credential like the S3 keys (issue #15): the Task shows the URL without query or fragment,
 * in every phase, as a completed task's row keeps it (tasks/model.ts PARAMS_WITHOUT_SECRETS).
 */
function hideInputQuery(p: RedactedParams): RedactedParams {
  if (!('url' in p.input)) return p;
  return { ...p, input: { ...p.input, url: p.input.url.replace(/[?#].*$/s, '') } };
}

/** How a `transcode-file` Task shows its params and output (spec/API.md "The Task"). */
export const transcodeTaskWire: TaskWireShape = {
  // Validated on the way in (routes.ts), so the stored params have the request's shape.
  params: (stored) => {
    const params = hideInputQuery(redactParams(stored as TranscodeParams));
    return { outputs: params.outputs, 'transcode-file': params };
  },
  output: (stored, task, base) =>
    // Outputs in the built-in store are served under /media: each gets its absolute URL.
    ({ transcodeFile: task.params.storage ? stored : withUrls(stored, builtinOutputPrefix(task.id), base) }),
};

/**
 * `output` with a `url` beside every `path` (and a `posterUrl` beside the thumbnails'
 * `poster`), at any depth: renditions, audio and subtitle tracks are nested.
 */
function withUrls(output: unknown, prefix: string, base: PublicBase): Record<string, unknown> {
  const walk = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(walk);
    if (v === null || typeof v !== 'object') return v;
    const o: Record<string, unknown> = Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    const url = (p: unknown) => (typeof p === 'string' ? mediaUrl(base, prefix + p.replace(/^\/+/, '')) : undefined);
    if (url(o.path)) o.url = url(o.path);
    if (url(o.poster)) o.posterUrl = url(o.poster);
    return o;
  };
  return walk(output) as Record<string, unknown>;
}
