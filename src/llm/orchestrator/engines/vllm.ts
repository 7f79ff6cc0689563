// The vLLM engine, for GPU clusters: an OpenAI-compatible vLLM server that the orchestrator
// starts as a child process (or reaches at MEDIAPLANE_VLLM_URL). The tuning variables become
// vLLM's own flags (vllmArgs); generation is relayed from its streaming chat endpoint (its text
// completion endpoint for a raw prompt), every field of the request passed through natively.

import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import {
  ContextLengthExceededError,
  type MediaplaneError,
  UpstreamFailedError,
  UpstreamUnavailableError,
  ValidationError,
} from '../../../lib/errors.ts';
import { parseSse } from '../../../lib/sse.ts';
import {
  type ChatMessage,
  FEATURES,
  type Feature,
  type FinishReason,
  type TokenLogprob,
  type Usage,
} from '../../protocol.ts';
import type { Engine, EngineModel, GenerateEvent, GenerateParams, ToolCallPiece } from '../engine.ts';
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
    // A prompt goes to vLLM's own text completion endpoint, so it is tokenized as is (no chat template).
    const path = p.prompt === undefined ? '/v1/chat/completions' : '/v1/completions';
    let res: Response;
    try {
      res = await fetch(`${this.#base}${path}`, {
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
      for await (const ev of parseSse(res.body)) {
        if (ev.data === '[DONE]') throw new UpstreamFailedError('vLLM ended the answer without its usage');
        // The pieces approximate the tokens while they stream (vLLM may send several in one
        // chunk); the usage, which ends the answer, makes the count exact.
        const before = stream.pieces;
        const events = stream.read(JSON.parse(ev.data) as VllmChunk);
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

  async close(): Promise<void> {
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await this.#exited;
    clearTimeout(timer);
  }
}

/**
 * The request vLLM's OpenAI server gets: every field of GenerateParams under OpenAI's name
 * (vLLM implements them natively: response_format through its guided decoding, tools with
 * tool_choice, n, logprobs, logit_bias). Unset fields are left out (JSON drops undefined), so
 * vLLM's own defaults apply to them, but temperature: unset is OpenAI's 1, never the model's.
 */
function vllmBody(model: string, p: GenerateParams): Record<string, unknown> {
  const common = {
    model,
    stream: true,
    stream_options: { include_usage: true },
    max_tokens: p.maxTokens,
    temperature: p.temperature ?? 1,
    top_p: p.topP,
    top_k: p.topK,
    stop: p.stop,
    seed: p.seed,
    presence_penalty: p.presencePenalty,
    frequency_penalty: p.frequencyPenalty,
    n: p.n > 1 ? p.n : undefined,
    logit_bias: p.logitBias,
    response_format: p.responseFormat,
  };
  // The legacy endpoint's `logprobs` is the number of alternatives (OpenAI's completions API).
  if (p.prompt !== undefined) return { ...common, prompt: p.prompt, logprobs: p.topLogprobs };
  return {
    ...common,
    messages: p.messages.map(vllmMessage),
    logprobs: p.topLogprobs === undefined ? undefined : true,
    top_logprobs: p.topLogprobs,
    tools: p.tools,
    tool_choice: p.toolChoice,
    parallel_tool_calls: p.parallelToolCalls,
  };
}

/** An assistant message that only called tools has `content: null`, as OpenAI's clients send it. */
function vllmMessage(m: ChatMessage): Record<string, unknown> {
  return m.role === 'assistant' && m.tool_calls?.length && m.content === '' ? { ...m, content: null } : { ...m };
}

/** The parts of a vLLM stream chunk read here: chat.completion.chunk or text_completion. */
interface VllmChunk {
  choices?: Array<{
    index?: number;
    /** Chat. */
    delta?: {
      content?: string | null;
      tool_calls?: Array<{
        index?: number;
        id?: string | null;
        function?: { name?: string | null; arguments?: string | null } | null;
      }> | null;
    } | null;
    /** Text completion. */
    text?: string | null;
    logprobs?: ChunkLogprobs | null;
    finish_reason?: string | null;
  }>;
  usage?: Usage | null;
  /** A failure after the stream began (vLLM writes it as a chunk, then [DONE]). */
  error?: { message?: string } | string;
  object?: string;
  message?: string;
}

/**
 * A chunk's log probabilities: the chat API's `content` (OpenAI's TokenLogprob entries), or the
 * completions API's parallel arrays with alternatives as {token: logprob} maps.
 */
interface ChunkLogprobs {
  content?: Array<Partial<TokenLogprob>> | null;
  tokens?: string[];
  token_logprobs?: Array<number | null>;
  top_logprobs?: Array<Record<string, number> | null>;
}

/**
 * Turns vLLM's chunks into the GenerateEvents of the Engine contract: per choice its text and
 * tool-call pieces, `end` once per choice (a choice that called tools ends `tool_calls`, which
 * older vLLM versions reported as `stop`), then the usage.
 */
class VllmStream {
  /** Text and tool-call pieces seen (tokensComputed counts them until the usage is known). */
  pieces = 0;
  readonly #n: number;
  readonly #ended = new Set<number>();
  /** Per choice: vLLM's tool call index to its position in the choice, in order of appearance. */
  readonly #calls = new Map<number, Map<number, number>>();

  constructor(n: number) {
    this.#n = Math.max(1, n);
  }

  read(c: VllmChunk): GenerateEvent[] {
    if (c.error !== undefined || c.object === 'error') {
      const detail = typeof c.error === 'string' ? c.error : (c.error?.message ?? c.message ?? 'unknown error');
      throw new UpstreamFailedError(`vLLM failed during the answer: ${detail}`);
    }
    const out: GenerateEvent[] = [];
    for (const choice of c.choices ?? []) this.#choice(choice, out);
    if (c.usage) {
      // Every choice has ended before the usage (vLLM sends each finish_reason first).
      for (let i = 0; i < this.#n; i++)
        if (!this.#ended.has(i)) out.push({ type: 'end', index: i, text: '', finishReason: 'stop' });
      out.push({ type: 'usage', usage: c.usage });
    }
    return out;
  }

  #choice(choice: NonNullable<VllmChunk['choices']>[number], out: GenerateEvent[]): void {
    const index = choice.index ?? 0;
    if (this.#ended.has(index)) return;
    const text = choice.delta?.content ?? choice.text ?? '';
    const logprobs = tokenLogprobs(choice.logprobs);
    const withLogprobs = logprobs ? { logprobs } : {};
    for (const call of choice.delta?.tool_calls ?? []) {
      const piece = this.#piece(index, call);
      if (!piece) continue;
      this.pieces++;
      out.push({ type: 'tool_call', index, piece });
    }
    if (choice.finish_reason) {
      this.#ended.add(index);
      const finishReason = this.#calls.has(index) && choice.finish_reason !== 'length' ? 'tool_calls' : finish(choice);
      if (text) this.pieces++;
      out.push({ type: 'end', index, text, ...withLogprobs, finishReason });
    } else if (text || logprobs?.length) {
      this.pieces++;
      out.push({ type: 'text', index, text, ...withLogprobs });
    }
  }

  #piece(
    index: number,
    call: NonNullable<NonNullable<NonNullable<VllmChunk['choices']>[number]['delta']>['tool_calls']>[number],
  ): ToolCallPiece | undefined {
    let calls = this.#calls.get(index);
    if (!calls) {
      calls = new Map();
      this.#calls.set(index, calls);
    }
    // vLLM numbers a named tool_choice's call by the choice's index: positions are per choice.
    const key = call.index ?? 0;
    let position = calls.get(key);
    const first = position === undefined;
    if (position === undefined) {
      position = calls.size;
      calls.set(key, position);
    }
    const name = call.function?.name ?? undefined;
    const args = call.function?.arguments ?? '';
    if (!first) return args ? { call: position, arguments: args } : undefined;
    return { call: position, id: call.id ?? toolCallId(), ...(name ? { name } : {}), arguments: args };
  }
}

function finish(choice: { finish_reason?: string | null }): FinishReason {
  if (choice.finish_reason === 'length') return 'length';
  return choice.finish_reason === 'tool_calls' ? 'tool_calls' : 'stop';
}

/** OpenAI's form of a chunk's log probabilities, from the chat or the completions API. */
function tokenLogprobs(lp: ChunkLogprobs | null | undefined): TokenLogprob[] | undefined {
  if (!lp) return undefined;
  if (lp.content) {
    return (lp.content ?? []).map((t) => ({
      token: t.token ?? '',
      logprob: t.logprob ?? 0,
      bytes: t.bytes ?? utf8Bytes(t.token ?? ''),
      top_logprobs: (t.top_logprobs ?? []).map((a) => ({
        token: a.token,
        logprob: a.logprob,
        bytes: a.bytes ?? utf8Bytes(a.token),
      })),
    }));
  }
  return legacyLogprobs(lp);
}

function legacyLogprobs(lp: ChunkLogprobs): TokenLogprob[] {
  return (lp.tokens ?? []).map((token, i) => ({
    token,
    logprob: lp.token_logprobs?.[i] ?? 0,
    bytes: utf8Bytes(token),
    top_logprobs: Object.entries(lp.top_logprobs?.[i] ?? {})
      .sort((a, b) => b[1] - a[1])
      .map(([t, logprob]) => ({ token: t, logprob, bytes: utf8Bytes(t) })),
  }));
}

function utf8Bytes(text: string): number[] {
  return [...Buffer.from(text, 'utf8')];
}

/** OpenAI's form of a tool call id, for a call vLLM streamed without one. */
function toolCallId(): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  return `call_${Array.from(randomBytes(24), (b) => alphabet[b % alphabet.length]).join('')}`;
}

/**
 * vLLM's refusal as one of the error family: its 400 (and a 422 from its request parsing) is
 * the caller's request, passed on with vLLM's message and param; a context overflow keeps its
 * code (the prompt alone too long names `prompt` or `messages`, else max_tokens); anything
 * else is vLLM failing.
 */
async function refusal(res: Response, promptField: 'messages' | 'prompt'): Promise<MediaplaneError> {
  const { message, param } = await errorOf(res);
  if (res.status !== 400 && res.status !== 422)
    return new UpstreamFailedError(`vLLM answered ${res.status}: ${message}`);
  if (/maximum context length/i.test(message)) {
    const promptAlone = /your request has \d+ input tokens\. Please reduce/i.test(message);
    return new ContextLengthExceededError(message, { param: promptAlone ? promptField : 'max_tokens' });
  }
  return new ValidationError(message, param ? { param } : {});
}

/** The message and param of an error body, in vLLM's newer `{error: {...}}` shape or its older flat one. */
async function errorOf(res: Response): Promise<{ message: string; param?: string }> {
  const text = await res.text().catch(() => '');
  try {
    const j = JSON.parse(text) as {
      error?: { message?: unknown; param?: unknown } | string;
      message?: unknown;
      param?: unknown;
    };
    const e = typeof j.error === 'object' && j.error !== null ? j.error : j;
    const message = typeof e.message === 'string' ? e.message : typeof j.error === 'string' ? j.error : undefined;
    if (message !== undefined) return { message, ...(typeof e.param === 'string' ? { param: e.param } : {}) };
  } catch {
    // not JSON: use the text
  }
  return { message: text.slice(0, 300) || `status ${res.status}` };
}
