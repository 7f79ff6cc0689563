import { type Static, Type } from '@sinclair/typebox';
import { c2paProblems, type OutputFolders, StoredProfile } from '../transcode/index.ts';
import { ASSET_HLS_FOLDER } from './keys.ts';

// What an asset's owner asks of its processing, defined once: the create bodies of the API
// (api/contract/asset.ts) take these fields, the asset keeps them as its spec, its task
// carries them, and the task's handler (stored check, then process.ts) reads them.

export const ProcessingSpec = Type.Object({
  staticMp4: Type.Optional(
    Type.Boolean({ description: 'Also write MP4 renditions; the playback info lists them with their sizes.' }),
  ),
  profiles: Type.Optional(
    Type.Array(StoredProfile, { description: 'The ladder, as in POST /api/transcode; absent: the default ladder.' }),
  ),
  c2pa: Type.Optional(
    Type.Boolean({
      description: 'Sign the MP4 renditions with a C2PA manifest: needs staticMp4 and a server with signing set up.',
    }),
  ),
  targetSegmentSizeSecs: Type.Optional(
    Type.Number({ minimum: 1, maximum: 60, description: 'Segment duration in seconds, from 1 to 60 (default 6).' }),
  ),
});
export type ProcessingSpec = Static<typeof ProcessingSpec>;

/** The spec's fields of `body` (a create body, a task's params), the others left out. */
export function processingSpecOf(body: Readonly<Record<string, unknown>>): ProcessingSpec {
  const spec: Record<string, unknown> = {};
  for (const key of Object.keys(ProcessingSpec.properties))
    if (body[key] !== undefined && body[key] !== null) spec[key] = body[key];
  // The fields are the schema's own, checked by the caller's schema (the body's, the task's).
  return spec as ProcessingSpec;
}

/** An asset's outputs under its prefix: HLS (TS) always, with MP4 renditions when asked. */
export function assetOutputs(spec: Pick<ProcessingSpec, 'staticMp4'>): OutputFolders {
  return { hls: { path: `/${ASSET_HLS_FOLDER}` }, ...(spec.staticMp4 ? { mp4: { path: '/mp4' } } : {}) };
}

/** Why the spec cannot be processed on this server (C2PA without a signer or without MP4s); none: []. */
export function processingProblems(spec: ProcessingSpec, o: { signing: boolean }): string[] {
  return c2paProblems({
    c2pa: spec.c2pa,
    signing: o.signing,
    outputs: assetOutputs(spec),
    // An asset's owner asks for MP4s with staticMp4, not with outputs.
    unsigned: 'signing applies to the MP4 renditions; set staticMp4 to true',
  });
}
