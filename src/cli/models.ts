// `mediaplane models pull|list|rm`: the model directory (MEDIAPLANE_MODELS_DIR) kept like a
// package manager keeps its packages. pull downloads one GGUF of a model from the hub with a
// progress bar, resumes a download that was cut, and installs nothing it has not checked
// against the hub's sha256 (llm/orchestrator: pullModel, the same path the orchestrator takes
// for an absent warm model). The directory is where `start` and `orchestrator` look, so a
// pulled model is offered at the next start with no other setting.

import { resolve } from 'node:path';
import type { Config } from '../config/index.ts';
import { MediaplaneError } from '../lib/errors.ts';
import {
  localModels,
  PREFERRED_QUANTIZATIONS,
  type PullEvent,
  pullModel,
  removeModel,
} from '../llm/orchestrator/index.ts';
import { MODEL_ID_RE } from '../llm/protocol/index.ts';
import { type CommandFlags, type ParsedArgs, UsageError } from './args.ts';

/** A small instruct model that runs on a laptop CPU (Apache-2.0, about 400 MB at Q4_K_M). */
export const SUGGESTED_MODEL = 'Qwen/Qwen2.5-0.5B-Instruct-GGUF';
/** The command that gets it, as the README names commands. */
export const SUGGESTED_PULL = `./mediaplane models pull ${SUGGESTED_MODEL}`;

export const MODELS_HELP = `Usage:
  ./mediaplane models pull ORG/NAME [--quantization Q]
  ./mediaplane models list [--json]
  ./mediaplane models rm ORG/NAME

Models live in MEDIAPLANE_MODELS_DIR (default ./models) as <org>/<model_name>/*.gguf. That is
where \`./mediaplane start\` and \`./mediaplane orchestrator\` look: a pulled model is offered the
next time the service starts, with no other setting.

  pull   downloads one GGUF file of a model from the hub (MEDIAPLANE_MODEL_HUB_URL, default
         https://huggingface.co) with a progress bar. The file is the one whose name holds
         --quantization (default MEDIAPLANE_LLM_QUANTIZATION), else the first of
         ${PREFERRED_QUANTIZATIONS.join(', ')} the model has, else its smallest. A download that
         is cut goes on where it stopped (now, or when the same pull runs again), and the file is
         checked against the hub's sha256 before it is installed: a mismatch installs nothing.
  list   the models in the directory, their files and sizes, and unfinished downloads
  rm     removes a model's folder

To start with, a small instruct model that runs on a laptop CPU (Apache-2.0, about 400 MB):
  ${SUGGESTED_PULL}

Exit status: 0 done, 1 failed (not on the hub, unreachable, checksum mismatch), 2 usage error.`;

export const MODELS_FLAGS: CommandFlags = { quantization: { type: 'string' }, json: { type: 'boolean' } };

interface Out {
  write(s: string): unknown;
  isTTY?: boolean;
}

export interface ModelsDeps {
  config: Config;
  stdout?: Out;
  stderr?: Out;
}

/** Runs `models ...` as the command line parsed it (cli/index.ts); resolves to the exit code. */
export async function modelsCommand(args: ParsedArgs, deps: ModelsDeps): Promise<number> {
  const [sub, id, ...extra] = args.positionals;
  const needsId = sub === 'pull' || sub === 'rm';
  if (sub !== 'list' && !needsId) throw new UsageError(`models needs pull, list or rm\n\n${MODELS_HELP}`);
  if (needsId && (!id || extra.length > 0)) throw new UsageError(`models ${sub} needs one model, ORG/NAME`);
  if (needsId && !MODEL_ID_RE.test(id ?? ''))
    throw new UsageError(`${JSON.stringify(id)} is not a model name: ORG/NAME, as on the hub (${SUGGESTED_MODEL})`);
  const err = deps.stderr ?? process.stderr;
  try {
    if (sub === 'pull') return await pull(id ?? '', args, deps);
    if (sub === 'rm') return await rm(id ?? '', deps);
    return await list(args, deps);
  } catch (e) {
    // Refusals and failures of the hub or the download are the user's to read, not stack traces.
    if (!(e instanceof MediaplaneError)) throw e;
    err.write(`mediaplane models ${sub}: ${e.message}\n`);
    return 1;
  }
}

async function pull(id: string, args: ParsedArgs, deps: ModelsDeps): Promise<number> {
  const { config } = deps;
  const out = deps.stdout ?? process.stdout;
  const asked = typeof args.flags.quantization === 'string' ? args.flags.quantization : config.llmQuantization;
  const bar = new DownloadProgress(out);
  out.write(`Pulling ${id} from ${config.modelHubUrl}\n`);
  const pulled = await pullModel({
    hubUrl: config.modelHubUrl,
    dir: config.modelsDir,
    id,
    quantization: asked,
    use8bit: config.use8bit,
    onEvent: (e) => bar.on(e, asked),
  }).finally(() => bar.end());
  if (!pulled.downloaded) {
    out.write(`${id} is already installed: ${pulled.path} (${bytesText(pulled.size)})\n`);
    return 0;
  }
  out.write(`Installed ${id}: ${pulled.path} (${bytesText(pulled.size)}, sha256 verified)\n`);
  out.write('It is offered the next time the service starts (./mediaplane start).\n');
  return 0;
}

async function list(args: ParsedArgs, deps: ModelsDeps): Promise<number> {
  const out = deps.stdout ?? process.stdout;
  const dir = resolve(deps.config.modelsDir);
  const models = await localModels(dir);
  if (args.flags.json === true) {
    out.write(`${JSON.stringify(models, null, 2)}\n`);
    return 0;
  }
  if (models.length === 0) {
    out.write(`No models in ${dir}. To get one: ${SUGGESTED_PULL}\n`);
    return 0;
  }
  const width = Math.max(...models.map((m) => m.id.length));
  for (const m of models) {
    for (const f of m.files) out.write(`${m.id.padEnd(width)}  ${f.name}  ${bytesText(f.size)}\n`);
    for (const p of m.partial)
      out.write(
        `${m.id.padEnd(width)}  ${p.name}  unfinished download (${bytesText(p.size)}): ./mediaplane models pull ${m.id} resumes it\n`,
      );
  }
  out.write(`(in ${dir})\n`);
  return 0;
}

async function rm(id: string, deps: ModelsDeps): Promise<number> {
  const out = deps.stdout ?? process.stdout;
  const dir = resolve(deps.config.modelsDir);
  if (!(await removeModel(dir, id))) {
    (deps.stderr ?? process.stderr).write(`mediaplane models rm: no model ${id} in ${dir}\n`);
    return 1;
  }
  out.write(`Removed ${id} from ${dir}\n`);
  return 0;
}

const BAR_WIDTH = 20;
/** Least ms between two redraws of the bar on a terminal. */
const REDRAW_MS = 100;

/**
 * What a pull is doing: a bar redrawn in place on a terminal; elsewhere (a pipe, a log, CI) a
 * line at each tenth of the file, so the output reads as a log.
 */
class DownloadProgress {
  readonly #out: Out;
  #drawn = false;
  #lastDraw = 0;
  #lastTenth = -1;
  #started = { at: 0, from: 0 };

  constructor(out: Out) {
    this.#out = out;
  }

  on(e: PullEvent, asked: string | undefined): void {
    if (e.type === 'chosen') {
      const why = asked ? `matches ${asked}` : 'the default choice';
      this.#line(`File: ${e.name} (${e.size === undefined ? 'size unknown' : bytesText(e.size)}; ${why})`);
      if (e.resumeFrom > 0) this.#line(`Resuming an earlier download from ${bytesText(e.resumeFrom)}`);
    } else if (e.type === 'start') {
      this.#started = { at: performance.now(), from: e.from };
    } else if (e.type === 'bytes') {
      this.#bytes(e.done, e.size);
    } else if (e.type === 'retry') {
      this.#line(`Download cut at ${bytesText(e.done)} (${e.reason}): resuming in ${(e.inMs / 1000).toFixed(1)} s`);
    } else {
      this.#line(
        e.sha256 ? `Verifying sha256 ${e.sha256}` : 'The hub gives no sha256 for this file: checking its size only',
      );
    }
  }

  #bytes(done: number, size: number | undefined): void {
    const fraction = size ? Math.min(1, done / size) : 0;
    const amount = size ? `${bytesText(done)} / ${bytesText(size)}` : bytesText(done);
    const parts = [`${barOf(fraction)} ${String(Math.floor(fraction * 100)).padStart(3)}%`, amount, this.#rate(done)];
    const text = parts.filter(Boolean).join('  ');
    if (this.#out.isTTY) {
      const now = performance.now();
      if (now - this.#lastDraw < REDRAW_MS && done !== size) return;
      this.#lastDraw = now;
      this.#out.write(`\r\x1b[2K${text}`);
      this.#drawn = true;
      return;
    }
    const tenth = Math.floor(fraction * 10);
    if (tenth === this.#lastTenth) return;
    this.#lastTenth = tenth;
    this.#out.write(`${text}\n`);
  }

  #rate(done: number): string {
    const s = (performance.now() - this.#started.at) / 1000;
    return s > 0.5 ? `${bytesText((done - this.#started.from) / s)}/s` : '';
  }

  #line(text: string): void {
    this.end();
    this.#out.write(`${text}\n`);
  }

  end(): void {
    if (this.#drawn) this.#out.write('\n');
    this.#drawn = false;
  }
}

function barOf(fraction: number): string {
  // Rounded down: a bar is full only when every byte is here.
  const filled = Math.floor(fraction * BAR_WIDTH);
  return `[${'#'.repeat(filled)}${'.'.repeat(BAR_WIDTH - filled)}]`;
}

export function bytesText(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} GB`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)} MB`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} kB`;
  return `${Math.round(n)} B`;
}
