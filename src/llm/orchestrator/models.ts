// The model directory: `<dir>/<org>/<model_name>/*.gguf`, laid out like the public model hub
// so a user can point it at an existing cache. Absent models are fetched from the hub when
// the network allows; offline, the error says where to put the file instead.

import { createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { NotFoundError, UpstreamUnavailableError } from '../../lib/errors.ts';
import { MODEL_ID_RE } from '../protocol/index.ts';

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

export interface HubOptions extends PickOptions {
  hubUrl: string;
  dir: string;
  id: string;
  signal?: AbortSignal;
}

/**
 * Downloads one GGUF of `id` from the hub into `<dir>/<org>/<model_name>/` (through a
 * `.part` file, so a broken download never looks like a model). Hub API: GET
 * /api/models/<id> lists `siblings[].rfilename`; files come from /<id>/resolve/main/<file>.
 */
export async function downloadFromHub(opts: HubOptions): Promise<string> {
  const base = opts.hubUrl.replace(/\/+$/, '');
  const where = join(opts.dir, ...opts.id.split('/'));
  const offline = (cause: unknown): UpstreamUnavailableError =>
    new UpstreamUnavailableError(
      `model ${opts.id} is not in ${opts.dir} and the model hub ${base} cannot be reached (${cause instanceof Error ? cause.message : String(cause)}); ` +
        `put a GGUF file in ${where}/ or allow network access to the hub`,
      { cause },
    );
  let listing: Response;
  try {
    listing = await fetch(`${base}/api/models/${opts.id}`, { signal: opts.signal ?? AbortSignal.timeout(15_000) });
  } catch (err) {
    throw offline(err);
  }
  if (listing.status === 404 || listing.status === 401)
    throw new NotFoundError(`model ${opts.id} is neither in ${opts.dir} nor on the model hub ${base}`);
  if (!listing.ok) throw offline(new Error(`hub answered ${listing.status}`));
  const info = (await listing.json()) as { siblings?: Array<{ rfilename?: unknown }> };
  const files = (info.siblings ?? []).flatMap((s) =>
    typeof s.rfilename === 'string' && s.rfilename.toLowerCase().endsWith('.gguf') && !s.rfilename.includes('/')
      ? [{ name: s.rfilename, size: 0 }]
      : [],
  );
  // Sizes are not in the listing; prefer the usual small quantizations by name.
  const order = ['q4_k_m', 'q4_0', 'q5_k_m', 'q8_0', 'f16'];
  files.sort((a, b) => rank(a.name) - rank(b.name));
  function rank(n: string): number {
    const i = order.findIndex((q) => n.toLowerCase().includes(q));
    return i === -1 ? order.length : i;
  }
  const name = pickQuantization(
    files.map((f, i) => ({ ...f, size: i })),
    opts,
  );
  if (!name)
    throw new NotFoundError(
      `model ${opts.id} on the hub has no GGUF file${opts.quantization ? ` matching ${opts.quantization}` : ''}`,
    );
  await mkdir(where, { recursive: true });
  const target = join(where, name);
  const part = `${target}.part`;
  try {
    const res = await fetch(
      `${base}/${opts.id}/resolve/main/${encodeURIComponent(name)}`,
      opts.signal ? { signal: opts.signal } : {},
    );
    if (!res.ok || !res.body) throw new Error(`hub answered ${res.status} for ${name}`);
    await pipeline(Readable.fromWeb(res.body), createWriteStream(part));
    await rename(part, target);
  } catch (err) {
    await rm(part, { force: true });
    throw offline(err);
  }
  return target;
}
