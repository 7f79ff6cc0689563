// The model directory: `<dir>/<org>/<model_name>/*.gguf`, laid out like the public model hub
// so a user can point it at an existing cache. Models get there by `mediaplane models pull`
// (pullModel) or, for a warm model that is absent, when the orchestrator starts
// (downloadFromHub): one download path for both, resumed when cut and verified against the
// hub's sha256 (download.ts). Offline, the error says where to put the file instead.

import { mkdir, readdir, rm, rmdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { UpstreamUnavailableError } from '../../lib/errors.ts';
import { MODEL_ID_RE } from '../protocol/index.ts';
import { type DownloadEvent, downloadVerified } from './download.ts';
import { chooseHubFile, hubFiles, openHubFile } from './hub.ts';

async function dirs(path: string): Promise<string[]> {
  const entries = await readdir(path, { withFileTypes: true }).catch(() => []);
  return entries
    .filter((e) => e.isDirectory() && !e.name.startsWith('.'))
    .map((e) => e.name)
    .sort();
}

async function ggufFiles(folder: string): Promise<Array<{ name: string; size: number }>> {
  const entries = await readdir(folder, { withFileTypes: true }).catch(() => []);
  const out: Array<{ name: string; size: number }> = [];
  for (const e of entries) {
    if (!e.isFile() || !e.name.toLowerCase().endsWith('.gguf')) continue;
    out.push({ name: e.name, size: (await stat(join(folder, e.name))).size });
  }
  return out;
}

/** Every `<org>/<model_name>` under `dir` that holds at least one GGUF file. */
export async function listLocalModels(dir: string): Promise<string[]> {
  const ids: string[] = [];
  for (const org of await dirs(dir)) {
    for (const name of await dirs(join(dir, org))) {
      const id = `${org}/${name}`;
      if (MODEL_ID_RE.test(id) && (await ggufFiles(join(dir, org, name))).length > 0) ids.push(id);
    }
  }
  return ids;
}

export interface PickOptions {
  /** A substring of the file name, e.g. `Q4_K_M` (case-insensitive). */
  quantization?: string | undefined;
  use8bit: boolean;
}

/**
 * Chooses one GGUF among several quantizations: the named one, else a Q8_0 file when 8-bit
 * was asked for, else the smallest (the one most likely to fit).
 */
export function pickQuantization(files: Array<{ name: string; size: number }>, opts: PickOptions): string | undefined {
  const bySize = [...files].sort((a, b) => a.size - b.size || a.name.localeCompare(b.name));
  if (opts.quantization) {
    const q = opts.quantization.toLowerCase();
    return bySize.find((f) => f.name.toLowerCase().includes(q))?.name;
  }
  if (opts.use8bit) {
    const q8 = bySize.find((f) => /q8_0/i.test(f.name));
    if (q8) return q8.name;
  }
  return bySize[0]?.name;
}

/** The GGUF path of a local model, or undefined when the folder has none that matches. */
export async function localModelFile(dir: string, id: string, opts: PickOptions): Promise<string | undefined> {
  const folder = join(dir, ...id.split('/'));
  const name = pickQuantization(await ggufFiles(folder), opts);
  return name === undefined ? undefined : join(folder, name);
}

/** A model of the directory with its files, for `mediaplane models list`. */
export interface LocalModel {
  id: string;
  files: Array<{ name: string; size: number }>;
  /** Downloads cut short (`<file>.part`), which the next pull of the model resumes. */
  partial: Array<{ name: string; size: number }>;
}

/** Every model folder under `dir` with a GGUF file or an unfinished download in it. */
export async function localModels(dir: string): Promise<LocalModel[]> {
  const out: LocalModel[] = [];
  for (const org of await dirs(dir)) {
    for (const name of await dirs(join(dir, org))) {
      const id = `${org}/${name}`;
      if (!MODEL_ID_RE.test(id)) continue;
      const folder = join(dir, org, name);
      const files = await ggufFiles(folder);
      const partial = await partFiles(folder);
      if (files.length > 0 || partial.length > 0) out.push({ id, files, partial });
    }
  }
  return out;
}

async function partFiles(folder: string): Promise<Array<{ name: string; size: number }>> {
  const entries = await readdir(folder, { withFileTypes: true }).catch(() => []);
  const out: Array<{ name: string; size: number }> = [];
  for (const e of entries) {
    if (!e.isFile() || !e.name.toLowerCase().endsWith('.gguf.part')) continue;
    out.push({ name: e.name.slice(0, -'.part'.length), size: (await stat(join(folder, e.name))).size });
  }
  return out;
}

/** Removes a model's folder (its files and unfinished downloads); false when there was none. */
export async function removeModel(dir: string, id: string): Promise<boolean> {
  const folder = join(dir, ...id.split('/'));
  if (!MODEL_ID_RE.test(id) || !(await stat(folder).catch(() => undefined))?.isDirectory()) return false;
  await rm(folder, { recursive: true, force: true });
  // The org folder goes too once it is empty; one that still holds models fails to go, as it should.
  await rmdir(join(dir, id.split('/')[0] ?? '')).catch(() => undefined);
  return true;
}

export type PullEvent =
  /** The file taken from the hub; `resumeFrom` > 0 when an earlier pull left part of it. */
  | { type: 'chosen'; name: string; size: number | undefined; sha256: string | undefined; resumeFrom: number }
  | DownloadEvent;

export interface PullOptions {
  hubUrl: string;
  dir: string;
  id: string;
  /** A part of the GGUF file's name (Q4_K_M); unset: PREFERRED_QUANTIZATIONS (hub.ts). */
  quantization?: string | undefined;
  use8bit: boolean;
  onEvent?: ((e: PullEvent) => void) | undefined;
  signal?: AbortSignal | undefined;
  /** Tries of one download when it is cut (download.ts). */
  attempts?: number;
}

export interface Pulled {
  path: string;
  name: string;
  size: number;
  /** False when the file was already installed and nothing was downloaded. */
  downloaded: boolean;
}

/**
 * Downloads one GGUF of `id` into `<dir>/<org>/<model_name>/`: the file the quantization names
 * (hub.ts: chooseHubFile), resumed from its .part when an earlier try was cut, verified against
 * the hub's sha256 before it is installed. A file already installed is not downloaded again.
 */
export async function pullModel(o: PullOptions): Promise<Pulled> {
  const base = o.hubUrl.replace(/\/+$/, '');
  const file = chooseHubFile(await hubFiles({ base, id: o.id, signal: o.signal }), o);
  const where = join(o.dir, ...o.id.split('/'));
  const target = join(where, file.name);
  const installed = await stat(target).catch(() => undefined);
  if (installed?.isFile()) return { path: target, name: file.name, size: installed.size, downloaded: false };
  await mkdir(where, { recursive: true });
  const resumeFrom = (await stat(`${target}.part`).catch(() => undefined))?.size ?? 0;
  o.onEvent?.({ type: 'chosen', name: file.name, size: file.size, sha256: file.sha256, resumeFrom });
  await downloadVerified({
    name: file.name,
    target,
    open: (offset) => openHubFile({ base, id: o.id, file: file.name, offset, signal: o.signal }),
    expected: { size: file.size, sha256: file.sha256 },
    onEvent: o.onEvent,
    signal: o.signal,
    ...(o.attempts ? { attempts: o.attempts } : {}),
  });
  return { path: target, name: file.name, size: (await stat(target)).size, downloaded: true };
}

/**
 * An absent warm model fetched as the orchestrator starts: pullModel, with its progress in the
 * log (every tenth) and, when the hub cannot be reached, the words that say where to put the
 * file by hand instead.
 */
export async function downloadFromHub(o: PullOptions & { log?: Logger }): Promise<string> {
  const base = o.hubUrl.replace(/\/+$/, '');
  const log = o.log;
  log?.info({ model: o.id, hub: base }, 'model not in the model directory: downloading it');
  let tenth = -1;
  const onEvent = (e: PullEvent): void => {
    if (e.type === 'chosen')
      log?.info({ model: o.id, file: e.name, bytes: e.size, resumeFrom: e.resumeFrom }, 'downloading');
    if (e.type === 'retry') log?.warn({ model: o.id, done: e.done, reason: e.reason }, 'download cut: resuming');
    if (e.type !== 'bytes' || !e.size || Math.floor((10 * e.done) / e.size) === tenth) return;
    tenth = Math.floor((10 * e.done) / e.size);
    log?.info({ model: o.id, done: e.done, bytes: e.size }, `downloaded ${tenth * 10}%`);
  };
  try {
    return (await pullModel({ ...o, onEvent })).path;
  } catch (err) {
    if (!(err instanceof UpstreamUnavailableError)) throw err;
    const where = join(o.dir, ...o.id.split('/'));
    throw new UpstreamUnavailableError(
      `model ${o.id} is not in ${o.dir} and the model hub ${base} cannot be reached (${err.message}); ` +
        `put a GGUF file in ${where}/ or allow network access to the hub`,
      { cause: err },
    );
  }
}
