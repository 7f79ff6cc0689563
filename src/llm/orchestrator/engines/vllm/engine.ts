// The vLLM engine, for GPU clusters: an OpenAI-compatible vLLM server that the orchestrator
// starts as a child process (or reaches at MEDIAPLANE_VLLM_URL). The tuning variables become
// vLLM's own flags (process.ts, which also starts and stops the child); generation is relayed
// from its streaming chat endpoint (its text completion endpoint for a raw prompt), every field
// of the request passed through natively (request.ts). What vLLM answers is read in wire.ts and
// turned into the engine's events in stream.ts.

import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { UpstreamFailedError, UpstreamUnavailableError, ValidationError } from '../../../../lib/errors.ts';
import { FEATURES, type Feature } from '../../../protocol/types.ts';
import type { Engine, EngineModel, GenerateEvent, GenerateParams } from '../../engine.ts';
import { localModelFile } from '../../models.ts';
import {
  checkTuning,
  readHfConfigMeta,
  readModelMeta,
  type EffectiveTuning,
  type ModelMeta,
  type Tuning,
} from '../../tuning.ts';
import { freePort, VllmServer, vllmArgs } from './process.ts';
import { vllmBody } from './request.ts';
import { VllmStream } from './stream.ts';
import { refusal, vllmChunks } from './wire.ts';

export interface VllmOptions {
  modelsDir: string;
  /** Exactly one `<org>/<model_name>`: a vLLM server serves one model. */
  models: readonly string[];
  tuning: Tuning;
  /** Reach this running server instead of starting one. */
  url?: string | undefined;
  /** Program and leading arguments, e.g. ['vllm', 'serve']. */
  command: readonly string[];
  startTimeoutMs: number;
  log: Logger;
}

export class VllmEngine implements Engine {
  readonly name = 'vllm';
  /**
   * Every feature but embeddings (they would need a second vLLM, `--task embed`): vLLM's
   * OpenAI server has them natively. tool_choice `auto` (also tools without a tool_choice)
   * needs vLLM's `--enable-auto-tool-choice --tool-call-parser <parser for the model>`, which
   * MEDIAPLANE_VLLM_COMMAND can add (`vllm,serve,--enable-auto-tool-choice,--tool-call-parser,hermes`);
   * without them vLLM refuses it with a 400 that names the flags, passed on to the caller.
   */
  readonly features: readonly Feature[] = FEATURES.filter((f) => f !== 'embeddings');
  tokensComputed = 0;
  readonly #opts: VllmOptions;
  readonly #model: string;
  #tuning: EffectiveTuning | undefined;
  readonly #server: VllmServer;

  constructor(opts: VllmOptions) {
    if (opts.models.length !== 1) {
      throw new ValidationError(
        `MEDIAPLANE_ORCHESTRATOR_MODELS: the vllm engine serves exactly one model (got ${opts.models.length ? opts.models.join(', ') : 'none'})`,
      );
    }
    this.#opts = opts;
    this.#model = opts.models[0] ?? '';
    this.#server = new VllmServer({ command: opts.command, startTimeoutMs: opts.startTimeoutMs, log: opts.log });
  }

  /** The model's local folder when present (vLLM loads it from there), else its hub id. */
  async #source(): Promise<{ arg: string; meta?: ModelMeta }> {
    const folder = join(this.#opts.modelsDir, ...this.#model.split('/'));
    const hf = await readHfConfigMeta(folder);
    if (hf) return { arg: folder, meta: hf };
    const gguf = await localModelFile(this.#opts.modelsDir, this.#model, { use8bit: this.#opts.tuning.use8bit });
    if (gguf) return { arg: gguf, meta: await readModelMeta(gguf) };
    const exists = await stat(folder).then(
      () => true,
      () => false,
    );
    return { arg: exists ? folder : this.#model };
  }

  async start(): Promise<void> {
    const o = this.#opts;
    const src = await this.#source();
    if (src.meta) this.#tuning = checkTuning(this.#model, o.tuning, src.meta);
    else {
      // Without local metadata vLLM checks the values itself when it loads the model.
      const { maxModelLenIsDefault: _d, ...rest } = o.tuning;
      this.#tuning = rest;
      o.log.warn(
        { model: this.#model },
        'no local config.json or GGUF for the model: vLLM will check the tuning variables itself',
      );
    }
    if (o.url) {
      this.#server.reach(o.url);
    } else {
      const port = await freePort();
      this.#server.spawn(vllmArgs({ model: src.arg, servedName: this.#model, port, tuning: this.#tuning }), port);
    }
    await this.#server.waitHealthy(this.#model);
  }

  models(): EngineModel[] {
    return [{ id: this.#model, warm: this.#server.healthy, contextLength: this.#tuning?.maxModelLen }];
  }

  async *generate(model: string, p: GenerateParams, signal: AbortSignal): AsyncGenerator<GenerateEvent> {
    // A prompt goes to vLLM's own text completion endpoint, so it is tokenized as is (no chat template).
    const path = p.prompt === undefined ? '/v1/chat/completions' : '/v1/completions';
    let res: Response;
    try {
      res = await fetch(`${this.#server.base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(vllmBody(model, p)),
        signal,
      });
    } catch (err) {
      if (signal.aborted) return;
      throw new UpstreamUnavailableError(`vLLM unreachable: ${(err as Error).message}`, { cause: err });
    }
    if (!res.ok || !res.body) throw await refusal(res, p.prompt === undefined ? 'messages' : 'prompt');
    const stream = new VllmStream(p.n);
    try {
      for await (const chunk of vllmChunks(res.body)) {
        // The pieces approximate the tokens while they stream (vLLM may send several in one
        // chunk); the usage, which ends the answer, makes the count exact.
        const before = stream.pieces;
        const events = stream.read(chunk);
        this.tokensComputed += stream.pieces - before;
        for (const e of events) {
          if (e.type === 'usage') this.tokensComputed += Math.max(0, e.usage.completion_tokens - stream.pieces);
          yield e;
          // Nothing after the usage is read (the GenerateEvent contract: it is the last event).
          if (e.type === 'usage') return;
        }
      }
    } catch (err) {
      if (signal.aborted) return;
      throw err;
    }
    if (!signal.aborted) throw new UpstreamFailedError('vLLM closed the answer before its usage');
  }

  /** Refused by name: the gateway sends embeddings only to orchestrators that advertise them. */
  async embed(): Promise<never> {
    throw new ValidationError('input: the vllm engine of this orchestrator serves no embeddings', { param: 'input' });
  }

  close(): Promise<void> {
    return this.#server.close();
  }
}
