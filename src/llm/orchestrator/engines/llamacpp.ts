// The llama.cpp engine through node-llama-cpp: GGUF models, CPU here, CUDA/Vulkan/Metal
// where present. One context per model with MAX_NUM_SEQS sequences: concurrent requests
// each take a sequence and node-llama-cpp evaluates them in one shared batch (continuous
// batching). The tuning variables map as the issue (#4) lays out: MAX_MODEL_LEN the context
// per sequence, MAX_NUM_BATCHED_TOKENS the batch size, USE_8BIT a q8_0 KV cache (and a
// Q8_0 file when the folder has one), GPU_MEMORY_UTILIZATION the VRAM share left unused as
// padding. The parallel sizes are checked, but llama.cpp spreads layers over every visible
// GPU by itself, so it does not otherwise use them.

import {
  getLlama,
  LlamaChat,
  LlamaLogLevel,
  type ChatHistoryItem,
  type Llama,
  type LlamaContext,
  type LlamaModel,
} from 'node-llama-cpp';
import type { Logger } from 'pino';
import { NotFoundError } from '../../../lib/errors.ts';
import {
  PromptTooLongError,
  type Engine,
  type EngineModel,
  type GenerateEvent,
  type GenerateParams,
} from '../engine.ts';
import { downloadFromHub, listLocalModels, localModelFile } from '../models.ts';
import { checkTuning, readGgufMeta, TuningError, type EffectiveTuning, type Tuning } from '../tuning.ts';

export interface LlamaCppOptions {
  modelsDir: string;
  warmModels: readonly string[];
  tuning: Tuning;
  /** CPU threads per evaluation; 0 lets llama.cpp use every core. */
  threads: number;
  gpu: 'auto' | 'cpu' | 'cuda' | 'vulkan' | 'metal';
  quantization?: string | undefined;
  hubUrl: string;
  log: Logger;
}

interface Offered {
  file: string;
  tuning: EffectiveTuning;
}
interface Loaded {
  model: LlamaModel;
  context: LlamaContext;
  /** Requests generating on this context now (see dispatchSchedule). */
  active: number;
}

export class LlamaCppEngine implements Engine {
  readonly name = 'llama.cpp';
  tokensComputed = 0;
  readonly #opts: LlamaCppOptions;
  #llama: Llama | undefined;
  readonly #offered = new Map<string, Offered>();
  readonly #loading = new Map<string, Promise<Loaded>>();
  readonly #loaded = new Map<string, Loaded>();

  constructor(opts: LlamaCppOptions) {
    this.#opts = opts;
  }

  async start(): Promise<void> {
    const o = this.#opts;
    const pick = { quantization: o.quantization, use8bit: o.tuning.use8bit };
    const ids = new Set(await listLocalModels(o.modelsDir));
    for (const id of o.warmModels) {
      if (ids.has(id)) continue;
      o.log.info({ model: id, hub: o.hubUrl }, 'model not in the model directory: downloading it');
      await downloadFromHub({ hubUrl: o.hubUrl, dir: o.modelsDir, id, ...pick });
      ids.add(id);
    }
    // Every offered model is checked now, so a bad variable stops start-up rather than
    // failing the first request for a cold model.
    const problems: string[] = [];
    for (const id of ids) {
      const file = await localModelFile(o.modelsDir, id, pick);
      if (!file) {
        problems.push(
          `${id}: no GGUF file${o.quantization ? ` matching MEDIAPLANE_LLM_QUANTIZATION=${o.quantization}` : ''} in ${o.modelsDir}/${id}`,
        );
        continue;
      }
      try {
        this.#offered.set(id, { file, tuning: checkTuning(id, o.tuning, await readGgufMeta(file)) });
      } catch (err) {
        if (err instanceof TuningError) problems.push(...err.problems.map((p) => `${p} [${id}]`));
        else throw err;
      }
    }
    if (problems.length > 0) throw new TuningError(o.warmModels.join(', ') || o.modelsDir, problems);
    if (this.#offered.size === 0) {
      // Nothing to serve (a fresh `mediaplane start` with an empty model directory): the
      // llama.cpp runtime, which costs memory and start-up time, is not loaded at all.
      o.log.info({ modelsDir: o.modelsDir }, 'llama.cpp engine idle: no models in the model directory');
      return;
    }
    this.#llama = await getLlama({
      gpu: o.gpu === 'cpu' ? false : o.gpu,
      build: 'never',
      progressLogs: false,
      ...(o.threads > 0 ? { maxThreads: o.threads } : {}),
      vramPadding: (total: number) => Math.floor(total * (1 - o.tuning.gpuMemoryUtilization)),
      logLevel: LlamaLogLevel.warn,
      logger: (level, message) => o.log.debug({ level, engine: 'llama.cpp' }, message.trim()),
    });
    for (const id of o.warmModels) await this.#load(id);
    o.log.info(
      { models: [...this.#offered.keys()], warm: o.warmModels, gpu: this.#llama.gpu || 'cpu', threads: o.threads },
      'llama.cpp engine ready',
    );
  }

  models(): EngineModel[] {
    return [...this.#offered].map(([id, off]) => {
      const loaded = this.#loaded.get(id);
      return { id, warm: loaded !== undefined, contextLength: loaded?.context.contextSize ?? off.tuning.maxModelLen };
    });
  }

  #load(id: string): Promise<Loaded> {
    const ready = this.#loading.get(id);
    if (ready) return ready;
    const offered = this.#offered.get(id);
    const llama = this.#llama;
    if (!offered || !llama) return Promise.reject(new NotFoundError(`model ${id} is not offered by this orchestrator`));
    const t = offered.tuning;
    const p = (async () => {
      const started = performance.now();
      const model = await llama.loadModel({ modelPath: offered.file });
      const counts = { active: 0 };
      const context = await model.createContext({
        contextSize: t.maxModelLen,
        sequences: t.maxNumSeqs,
        batchSize: Math.min(t.maxNumBatchedTokens, t.maxModelLen * t.maxNumSeqs),
        threads: this.#opts.threads,
        ...(t.use8bit
          ? {
              flashAttention: true,
              experimentalKvCacheKeyType: 'Q8_0' as const,
              experimentalKvCacheValueType: 'Q8_0' as const,
            }
          : {}),
        // node-llama-cpp's default ("nextCycle") waits for a setImmediate before each decode so
        // that every sequence's next token joins one batch; it dispatches at once only when all
        // MAX_NUM_SEQS sequences queued. With one request generating, nothing else can join, and
        // that wait put the socket write of each token (and any other I/O of the turn) in front
        // of the next decode instead of beside it. Dispatching at once, the next decode starts
        // ~6 us after a token's text callback and the socket write ~34 us after it; single
        // stream over HTTP went from 1,996 to 2,213 tok/s (interleaved A/B, 2-core host). So:
        // at once when alone, next cycle when several share the batch.
        batching: {
          dispatchSchedule: (dispatch: () => void) => (counts.active <= 1 ? dispatch() : setImmediate(dispatch)),
        },
      });
      const loaded: Loaded = Object.assign(counts, { model, context });
      this.#loaded.set(id, loaded);
      this.#opts.log.info(
        {
          model: id,
          file: offered.file,
          contextPerSequence: context.contextSize,
          sequences: t.maxNumSeqs,
          ms: Math.round(performance.now() - started),
        },
        'model loaded',
      );
      return loaded;
    })();
    this.#loading.set(id, p);
    p.catch(() => this.#loading.delete(id));
    return p;
  }

  async *generate(id: string, p: GenerateParams, signal: AbortSignal): AsyncGenerator<GenerateEvent> {
    const loaded = await this.#load(id);
    const { model, context } = loaded;
    // The orchestrator's Slots admit at most MAX_NUM_SEQS requests, so a sequence is free.
    const sequence = context.getSequence();
    let chat: LlamaChat;
    try {
      chat = new LlamaChat({ contextSequence: sequence, autoDisposeSequence: false });
    } catch (err) {
      sequence.dispose(); // or the slot's sequence is lost for good
      throw err;
    }
    // Our own controller: ending the iteration early (the consumer's `return`) also stops
    // the native loop before the sequence is handed back.
    const stop = new AbortController();
    const onAbort = (): void => stop.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    // Text the consumer has not taken yet is merged into the next event (one SSE chunk, one
    // write): tokens are never held back, but a busy consumer catches up in one step.
    const events = new PushQueue<GenerateEvent>((a, b) =>
      a.type === 'text' ? { ...b, text: a.text + b.text } : undefined,
    );
    let running: Promise<unknown> = Promise.resolve();
    loaded.active++;
    try {
      const history: ChatHistoryItem[] = [
        ...p.messages.map(
          (m): ChatHistoryItem =>
            m.role === 'assistant' ? { type: 'model', response: [m.content] } : { type: m.role, text: m.content },
        ),
        { type: 'model', response: [] },
      ];
      const promptTokens = chat.chatWrapper
        .generateContextState({ chatHistory: history })
        .contextText.tokenize(model.tokenizer).length;
      const room = sequence.contextSize - promptTokens;
      if (room < 1) throw new PromptTooLongError(promptTokens, sequence.contextSize);
      let completion = 0;
      const cap = Math.min(p.maxTokens, room);
      // The text of the final token (max_tokens reached) rides on the end event, so the last
      // content chunk carries finish_reason without waiting for anything: onToken comes just
      // before onTextChunk for the same tokens, and the end follows without another decode.
      let last = false;
      let tail = '';
      const penalties = p.presencePenalty !== undefined || p.frequencyPenalty !== undefined;
      running = chat
        .generateResponse(history, {
          signal: stop.signal,
          stopOnAbortSignal: true,
          maxTokens: cap,
          // OpenAI's default temperature is 1; node-llama-cpp's is 0 (greedy).
          temperature: p.temperature ?? 1,
          ...(p.topP !== undefined ? { topP: p.topP } : {}),
          ...(p.topK !== undefined ? { topK: p.topK } : {}),
          ...(p.seed !== undefined ? { seed: p.seed } : {}),
          ...(p.stop ? { customStopTriggers: p.stop } : {}),
          repeatPenalty: penalties
            ? { penalty: 1, presencePenalty: p.presencePenalty ?? 0, frequencyPenalty: p.frequencyPenalty ?? 0 }
            : false,
          onToken: (tokens) => {
            completion += tokens.length;
            this.tokensComputed += tokens.length;
            last = completion >= cap;
          },
          onTextChunk: (text) => {
            if (last) tail += text;
            else if (text) events.push({ type: 'text', text });
          },
        })
        .then(
          (r) => {
            if (!stop.signal.aborted) {
              const finishReason = r.metadata.stopReason === 'maxTokens' ? 'length' : 'stop';
              events.push({
                type: 'end',
                text: tail,
                finishReason,
                usage: {
                  prompt_tokens: promptTokens,
                  completion_tokens: completion,
                  total_tokens: promptTokens + completion,
                },
              });
            }
            events.end();
          },
          (err: unknown) => events.fail(err),
        );
      yield* events;
    } finally {
      loaded.active--;
      signal.removeEventListener('abort', onAbort);
      stop.abort();
      await running.catch(() => undefined);
      chat.dispose({ disposeSequence: false });
      sequence.dispose();
    }
  }

  async close(): Promise<void> {
    for (const { context, model } of this.#loaded.values()) {
      await context.dispose();
      await model.dispose();
    }
    this.#loaded.clear();
    await this.#llama?.dispose();
  }
}

/**
 * A one-consumer async queue: callbacks push, the generator awaits. `merge` may combine an
 * item with the one queued before it (both not yet taken): undefined keeps them apart.
 */
class PushQueue<T> implements AsyncIterable<T> {
  readonly #items: T[] = [];
  readonly #merge: ((queued: T, next: T) => T | undefined) | undefined;
  #done = false;
  #error: unknown;
  #wake: (() => void) | undefined;

  constructor(merge?: (queued: T, next: T) => T | undefined) {
    this.#merge = merge;
  }

  push(item: T): void {
    const queued = this.#items.at(-1);
    const merged = queued === undefined ? undefined : this.#merge?.(queued, item);
    if (merged === undefined) this.#items.push(item);
    else this.#items[this.#items.length - 1] = merged;
    this.#wake?.();
  }
  end(): void {
    this.#done = true;
    this.#wake?.();
  }
  fail(err: unknown): void {
    this.#error = err ?? new Error('generation failed');
    this.end();
  }
  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    for (;;) {
      const item = this.#items.shift();
      if (item !== undefined) {
        yield item;
        continue;
      }
      if (this.#error !== undefined) throw this.#error;
      if (this.#done) return;
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
      this.#wake = undefined;
    }
  }
}
