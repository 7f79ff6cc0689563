// The vLLM engine, for GPU clusters: an OpenAI-compatible vLLM server that the orchestrator
// starts as a child process (or reaches at MEDIAPLANE_VLLM_URL). The tuning variables become
// vLLM's own flags (vllmArgs); generation is relayed from its streaming chat endpoint.

import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { UpstreamFailedError, UpstreamUnavailableError, ValidationError } from '../../../lib/errors.ts';
import { parseSse } from '../../../lib/sse.ts';
import type { FinishReason, Usage } from '../../protocol.ts';
import type { Engine, EngineModel, GenerateEvent, GenerateParams } from '../engine.ts';
import { localModelFile } from '../models.ts';
import {
  checkTuning,
  readHfConfigMeta,
  readModelMeta,
  type EffectiveTuning,
  type ModelMeta,
  type Tuning,
} from '../tuning.ts';

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

/** The vLLM command line for a model and the tuning variables (vLLM's flag names). */
export function vllmArgs(opts: { model: string; servedName: string; port: number; tuning: EffectiveTuning }): string[] {
  const t = opts.tuning;
  return [
    opts.model,
    '--host',
    '127.0.0.1',
    '--port',
    String(opts.port),
    '--served-model-name',
    opts.servedName,
    '--tensor-parallel-size',
    String(t.tensorParallelSize),
    '--pipeline-parallel-size',
    String(t.pipelineParallelSize),
    '--max-model-len',
    String(t.maxModelLen),
    '--max-num-batched-tokens',
    String(t.maxNumBatchedTokens),
    '--max-num-seqs',
    String(t.maxNumSeqs),
    '--gpu-memory-utilization',
    String(t.gpuMemoryUtilization),
    // 8-bit: FP8 weights (dynamic quantization) and an FP8 KV cache.
    ...(t.use8bit ? ['--quantization', 'fp8', '--kv-cache-dtype', 'fp8'] : []),
  ];
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

export class VllmEngine implements Engine {
  readonly name = 'vllm';
  tokensComputed = 0;
  readonly #opts: VllmOptions;
  readonly #model: string;
  #tuning: EffectiveTuning | undefined;
  #base = '';
  #child: ChildProcess | undefined;
  #exited: Promise<void> = Promise.resolve();
  #stderrTail: string[] = [];
  #healthy = false;

  constructor(opts: VllmOptions) {
    if (opts.models.length !== 1) {
      throw new ValidationError(
        `MEDIAPLANE_ORCHESTRATOR_MODELS: the vllm engine serves exactly one model (got ${opts.models.length ? opts.models.join(', ') : 'none'})`,
      );
    }
    this.#opts = opts;
    this.#model = opts.models[0] ?? '';
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
      this.#base = o.url.replace(/\/+$/, '');
    } else {
      const port = await freePort();
      this.#base = `http://127.0.0.1:${port}`;
      this.#spawn(vllmArgs({ model: src.arg, servedName: this.#model, port, tuning: this.#tuning }));
    }
    await this.#waitHealthy();
  }

  #spawn(args: string[]): void {
    const [cmd, ...lead] = this.#opts.command;
    if (!cmd) throw new ValidationError('MEDIAPLANE_VLLM_COMMAND: must name a program');
    const child = spawn(cmd, [...lead, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.#child = child;
    this.#opts.log.info({ command: [cmd, ...lead, ...args].join(' '), pid: child.pid }, 'starting vLLM');
    const keep = (buf: Buffer): void => {
      for (const line of buf.toString('utf8').split('\n')) {
        if (!line.trim()) continue;
        this.#stderrTail.push(line);
        if (this.#stderrTail.length > 20) this.#stderrTail.shift();
        this.#opts.log.debug({ engine: 'vllm' }, line);
      }
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    this.#exited = new Promise((resolve) => {
      child.once('error', (err) => {
        this.#stderrTail.push(err.message);
        resolve();
      });
      child.once('exit', (code, signal) => {
        if (this.#healthy) this.#opts.log.error({ code, signal }, 'vLLM exited');
        this.#healthy = false;
        resolve();
      });
    });
  }

  async #waitHealthy(): Promise<void> {
    const deadline = Date.now() + this.#opts.startTimeoutMs;
    let gone = false;
    void this.#exited.then(() => {
      if (this.#child) gone = true;
    });
    while (Date.now() < deadline) {
      if (gone)
        throw new UpstreamUnavailableError(
          `vLLM exited during start-up: ${this.#stderrTail.slice(-5).join(' | ') || 'no output'}`,
        );
      const ok = await fetch(`${this.#base}/health`, { signal: AbortSignal.timeout(2000) }).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) {
        this.#healthy = true;
        this.#opts.log.info({ url: this.#base, model: this.#model }, 'vLLM ready');
        return;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    await this.close();
    throw new UpstreamUnavailableError(
      `vLLM did not answer ${this.#base}/health within ${this.#opts.startTimeoutMs} ms`,
    );
  }

  models(): EngineModel[] {
    return [{ id: this.#model, warm: this.#healthy, contextLength: this.#tuning?.maxModelLen }];
  }

  async *generate(model: string, p: GenerateParams, signal: AbortSignal): AsyncGenerator<GenerateEvent> {
    const body = {
      model,
      messages: p.messages,
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: p.maxTokens,
      temperature: p.temperature,
      top_p: p.topP,
      top_k: p.topK,
      stop: p.stop,
      seed: p.seed,
      presence_penalty: p.presencePenalty,
      frequency_penalty: p.frequencyPenalty,
    };
    let res: Response;
    try {
      res = await fetch(`${this.#base}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal,
      });
    } catch (err) {
      if (signal.aborted) return;
      throw new UpstreamUnavailableError(`vLLM unreachable: ${(err as Error).message}`, { cause: err });
    }
    if (res.status === 400) throw new ValidationError(await errorMessage(res));
    if (!res.ok || !res.body) throw new UpstreamFailedError(`vLLM answered ${res.status}: ${await errorMessage(res)}`);
    let finish: FinishReason = 'stop';
    let tail = '';
    try {
      for await (const ev of parseSse(res.body)) {
        if (ev.data === '[DONE]') {
          // No usage chunk came (it ends the answer when it does): keep the held text anyway.
          if (tail) yield { type: 'text', text: tail };
          return;
        }
        const c = JSON.parse(ev.data) as {
          choices?: Array<{ delta?: { content?: string | null }; finish_reason?: string | null }>;
          usage?: Usage | null;
        };
        const choice = c.choices?.[0];
        const content = choice?.delta?.content ?? '';
        if (content) this.tokensComputed++;
        // vLLM sends the final step's text with its finish_reason: keep it for the end event,
        // so the last content chunk carries finish_reason (the usage chunk follows at once).
        if (choice?.finish_reason) {
          finish = choice.finish_reason === 'length' ? 'length' : 'stop';
          tail += content;
        } else if (content) yield { type: 'text', text: content };
        if (c.usage) {
          yield { type: 'end', text: tail, finishReason: finish, usage: c.usage };
          tail = '';
        }
      }
    } catch (err) {
      if (signal.aborted) return;
      throw err;
    }
  }

  async close(): Promise<void> {
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await this.#exited;
    clearTimeout(timer);
  }
}

async function errorMessage(res: Response): Promise<string> {
  const text = await res.text().catch(() => '');
  try {
    const j = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    const m = typeof j.error === 'object' ? j.error.message : (j.error ?? j.message);
    if (typeof m === 'string') return m;
  } catch {
    // not JSON: use the text
  }
  return text.slice(0, 300) || `status ${res.status}`;
}
