import { InternalError } from '../../lib/errors.ts';
import type { ChunkedFormat } from './chunked-format.ts';
import type { CommandPlan, OutputFolder, OutputFormat, OutputPart, OutputRun } from './format.ts';
import { fmp4 } from './fmp4.ts';
import { hls } from './hls.ts';
import { mp4 } from './mp4.ts';
import { thumbnails } from './thumbnails.ts';

// The output formats, written once. A new output kind is a module beside these (see
// format.ts; its chunked behaviour included), one line here and one field of `outputs` in the
// API's contract (api/contract/transcode.ts); docs/transcode.md, "Adding an output kind". The
// order is the order of the tee targets, of the checks' messages, of the chunked pieces'
// collecting and of the results. The single run and the chunked run (transcode/chunked/, which
// reaches the formats only through this file) both loop over this list.
export const OUTPUT_FORMATS = [hls, mp4, fmp4, thumbnails] as const;

type Format = (typeof OUTPUT_FORMATS)[number];
type ResultOf<F> = F extends OutputFormat<string, infer R> ? R : never;

/** The kinds a job asks for under `outputs`, each with its folder: hls, mp4, fmp4. */
export type OutputKind = Extract<Format, { requested: true }>['key'];
export const OUTPUT_KINDS: readonly OutputKind[] = OUTPUT_FORMATS.flatMap((f) => (f.requested ? [f.key] : []));

/** Which outputs to write, each under its folder. */
export type OutputFolders = { [K in OutputKind]?: OutputFolder };

/** Each format's result in `output.transcodeFile`, under its key. */
export type OutputsByKind = { [F in Format as F['key']]?: ResultOf<F> };

const FORMATS: readonly OutputFormat[] = OUTPUT_FORMATS;

/** The formats a command writes, in the list's order. */
export function formatsWritten(plan: CommandPlan): OutputFormat[] {
  return FORMATS.filter((f) => f.writes(plan));
}

/** The kinds `outputs` asks for, as the command's plan takes them. */
export function kindsOf(outputs: OutputFolders): Record<string, boolean> {
  return Object.fromEntries(OUTPUT_KINDS.map((k) => [k, outputs[k] !== undefined]));
}

/** The folder of the first HLS tree the job writes: where the formats not asked on their own go. */
export function treeFolder(outputs: Readonly<Partial<Record<string, OutputFolder>>>): OutputFolder | undefined {
  for (const f of FORMATS) if (f.tree && outputs[f.key]) return outputs[f.key];
  return undefined;
}

/** One format's part of a job, and where its result goes in the task's output. */
export interface OpenOutput {
  key: string;
  part: OutputPart<unknown>;
}

type Folders = Readonly<Partial<Record<string, OutputFolder>>>;

/** Where a format's files go: its own folder, or the first HLS tree's for a format not asked on its own. */
function folderOf(f: OutputFormat, outputs: Folders): OutputFolder | undefined {
  return f.requested ? outputs[f.key] : treeFolder(outputs);
}

/** Starts the part of every format the job writes, each under its folder. */
export function openOutputs(run: OutputRun, outputs: Folders): OpenOutput[] {
  return formatsWritten(run.plan).flatMap((f) => {
    const folder = folderOf(f, outputs);
    return folder ? [{ key: f.key, part: f.open(run, folder.path) }] : [];
  });
}

/** The formats whose files a job's `outputs` give a folder, each with it, in the list's order. */
function formatsOf(outputs: Folders): { format: OutputFormat; folder: OutputFolder }[] {
  return FORMATS.flatMap((format) => {
    const folder = folderOf(format, outputs);
    return folder ? [{ format, folder }] : [];
  });
}

/**
 * The first format of a job that a chunked run cannot make (`chunked: false`): the split
 * asks before splitting, and such a job is encoded in one run, whatever its length.
 */
export function unchunkable(outputs: Folders): OutputFormat | undefined {
  return formatsOf(outputs).find((o) => o.format.chunked === false)?.format;
}

/** A format's part of a chunked job: where its result goes, its folder and what its pieces do. */
export interface ChunkedOutput {
  key: string;
  prefix: string;
  chunked: ChunkedFormat<unknown>;
}

/** Every format of a chunked job with its chunked behaviour, in the list's order. */
export function chunkedOutputs(outputs: Folders): ChunkedOutput[] {
  return formatsOf(outputs).map(({ format, folder }) => {
    if (format.chunked === false) throw new InternalError(`chunked: ${format.label} cannot be chunked`);
    return { key: format.key, prefix: folder.path, chunked: format.chunked };
  });
}

export type { AudioPieceInput, AudioWindow, ChunkedJob, ChunkWindow, PieceRun, StitchRun } from './chunked-format.ts';
export { AAC_FRAME_SAMPLES, AUDIO_RATE } from './chunked-format.ts';
export { audioCodecArgs, audioSource } from './format.ts';
export type {
  CommandPlan,
  Encoder,
  OutputFolder,
  OutputFormat,
  OutputRun,
  WatchedPlaylist,
} from './format.ts';
export type { CmafOutput } from './fmp4.ts';
export type { Mp4Output } from './mp4.ts';
export type { ThumbnailsOutput } from './thumbnails.ts';
export { subtitleArgs } from './hls-tree.ts';
export { planThumbnails } from './thumbnails.ts';
