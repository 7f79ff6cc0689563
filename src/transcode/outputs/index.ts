import type { CommandPlan, OutputFolder, OutputFormat, OutputPart, OutputRun } from './format.ts';
import { fmp4 } from './fmp4.ts';
import { hls } from './hls.ts';
import { mp4 } from './mp4.ts';
import { thumbnails } from './thumbnails.ts';

// The output formats, written once (issue #26). A new output kind is a module beside these
// (see format.ts), one line here and one field of `outputs` in the API's contract
// (api/contract/transcode.ts); docs/transcode.md, "Adding an output kind". The order is the
// order of the tee targets, of the checks' messages and of the results.
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

/** Starts the part of every format the job writes, each under its folder. */
export function openOutputs(run: OutputRun, outputs: Readonly<Partial<Record<string, OutputFolder>>>): OpenOutput[] {
  const under = treeFolder(outputs);
  return formatsWritten(run.plan).flatMap((f) => {
    const folder = f.requested ? outputs[f.key] : under;
    return folder ? [{ key: f.key, part: f.open(run, folder.path) }] : [];
  });
}

export type {
  ChunkWindow,
  CommandPlan,
  Encoder,
  OutputFolder,
  OutputFormat,
  OutputRun,
  WatchedPlaylist,
} from './format.ts';
export type { ThumbnailsOutput } from './thumbnails.ts';
export type { CmafOutput } from './fmp4.ts';
export type { Mp4Output } from './mp4.ts';
export { subtitleArgs } from './hls-tree.ts';
export { planThumbnails } from './thumbnails.ts';
