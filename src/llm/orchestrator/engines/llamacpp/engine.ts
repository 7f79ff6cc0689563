// The llama.cpp engine through node-llama-cpp: GGUF models, CPU here, CUDA/Vulkan/Metal
// where present. One context per model with MAX_NUM_SEQS sequences: concurrent requests
// each take a sequence and node-llama-cpp evaluates them in one shared batch (continuous
// batching). The tuning variables map as the issue (#4) lays out: MAX_MODEL_LEN the context
// per sequence, MAX_NUM_BATCHED_TOKENS the batch size, USE_8BIT a q8_0 KV cache (and a
// Q8_0 file when the folder has one), GPU_MEMORY_UTILIZATION the VRAM share left unused as
// padding. The parallel sizes are checked, but llama.cpp spreads layers over every visible
// GPU by itself, so it does not otherwise use them.
//
// A request is planned first (plan.ts: everything that can refuse it, a 400 before any event),
// then its n choices run on n sequences at once (choice.ts), and the usage follows once all have
// ended. Messages become node-llama-cpp's chat history in history.ts; sampling changes and log
// probabilities are in logprobs.ts; tool calls in tools.ts; JSON Schema grammars in json-schema/.

import {
  type ChatWrapper,
  type GbnfJsonSchema,
  getLlama,
  type Llama,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaGrammar,
  LlamaLogLevel,
  type LlamaModel,
  resolveChatWrapper,
} from 'node-llama-cpp';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Logger } from 'pino';
import { InternalError, NotFoundError } from '../../../../lib/errors.ts';
import { FEATURES, type Feature } from '../../../protocol/types.ts';
import { type Embedded, llamaCppEmbed } from '../../embeddings.ts';
import type { Engine, EngineModel, GenerateEvent, GenerateParams } from '../../engine.ts';
import { downloadFromHub, listLocalModels, localModelFile } from '../../models.ts';
import { checkTuning, readGgufMeta, TuningError, type EffectiveTuning, type Tuning } from '../../tuning.ts';
import { createJsonGrammar } from './json-schema/index.ts';
import { runChoice } from './choice.ts';
import { choiceSeeds, type Plan, planRequest } from './plan.ts';

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
  /** The model's chat template, resolved once (LlamaChat would for each request). */
  chatWrapper: ChatWrapper;
  /** Sequences generating on this context now (see dispatchSchedule). */
  active: number;
}

export class LlamaCppEngine implements Engine {
  readonly name = 'llama.cpp';
  readonly features: readonly Feature[] = FEATURES;
  tokensComputed = 0;
  readonly #opts: LlamaCppOptions;
  #llama: Llama | undefined;
  readonly #offered = new Map<string, Offered>();
  readonly #loading = new Map<string, Promise<Loaded>>();
  readonly #loaded = new Map<string, Loaded>();
  /** Grammars by schema text, least recently used first. */
  readonly #grammars = new Map<string, Promise<LlamaGrammar>>();

  constructor(opts: LlamaCppOptions) {
    this.#opts = opts;
  }

  async start(): Promise<void> {
    const o = this.#opts;
    const pick = { quantization: o.quantization, use8bit: o.tuning.use8bit };
    const ids = new Set(await listLocalModels(o.modelsDir));
    for (const id of o.warmModels) {
      if (ids.has(id)) continue;
      await downloadFromHub({ hubUrl: o.hubUrl, dir: o.modelsDir, id, ...pick, log: o.log });
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
      const loaded: Loaded = Object.assign(counts, { model, context, chatWrapper: resolveChatWrapper(model) });
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
    // Everything that can refuse the request (400s) is checked before the first event.
    const plan = await planRequest(
      {
        model: loaded.model,
        chatWrapper: loaded.chatWrapper,
        contextSize: loaded.context.contextSize,
        grammar: (schema, maxTokens) => this.#grammar(schema, maxTokens),
      },
      p,
    );
    yield* this.#choices(loaded, plan, p, signal);
  }

  /** Runs the n choices on n sequences of the model's context (one batch), then the summed usage. */
  async *#choices(loaded: Loaded, plan: Plan, p: GenerateParams, signal: AbortSignal): AsyncGenerator<GenerateEvent> {
    // The orchestrator's Slots admit a request only when n sequences are free.
    const sequences = takeSequences(loaded.context, p.n);
    // Our own controller: ending the iteration early (the consumer's `return`) also stops
    // the native loops before the sequences are handed back.
    const stop = new AbortController();
    const onAbort = (): void => stop.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    if (signal.aborted) stop.abort();
    const events = new PushQueue<GenerateEvent>(mergeText, (e) => (e.type === 'usage' ? -1 : e.index));
    const seeds = choiceSeeds(p.seed, p.n);
    loaded.active += p.n;
    const start = oneTurnEach(plan.choice.grammar !== undefined);
    const runs = sequences.map((sequence, index) =>
      start(() =>
        runChoice({
          index,
          sequence,
          model: loaded.model,
          chatWrapper: loaded.chatWrapper,
          plan: plan.choice,
          seed: seeds[index] ?? 0,
          signal: stop.signal,
          emit: (event) => events.push(event),
          counted: (tokens) => {
            this.tokensComputed += tokens;
          },
        }),
      ),
    );
    const settled = Promise.allSettled(runs);
    Promise.all(runs).then(
      (choices) => {
        let completion = 0;
        for (const c of choices) {
          completion += c.completion;
          // Tokens that matched a stop string (or ended a grammar) were never released.
          this.tokensComputed += c.completion - c.counted;
        }
        const usage = { prompt_tokens: plan.promptTokens, completion_tokens: completion };
        if (!stop.signal.aborted)
          events.push({ type: 'usage', usage: { ...usage, total_tokens: usage.prompt_tokens + completion } });
        events.end();
      },
      (err: unknown) => events.fail(err),
    );
    try {
      yield* events;
    } finally {
      loaded.active -= p.n;
      signal.removeEventListener('abort', onAbort);
      stop.abort();
      await settled;
      for (const sequence of sequences) sequence.dispose();
    }
  }

  /**
   * The grammar of a schema, made once per schema while it is in use often (see GRAMMAR_CACHE).
   * Keyed by max_tokens too: json-schema/ bounds the keys of open objects by a cap that its
   * schema text does not show, and the cap follows from the caller's schema and max_tokens.
   */
  #grammar(schema: GbnfJsonSchema, maxTokens: number): Promise<LlamaGrammar> {
    const llama = this.#llama;
    if (!llama) return Promise.reject(new InternalError('llama.cpp is not loaded'));
    const key = `${maxTokens} ${JSON.stringify(schema)}`;
    const cached = this.#grammars.get(key);
    if (cached) {
      // Most recently used last: the first is the one to drop.
      this.#grammars.delete(key);
      this.#grammars.set(key, cached);
      return cached;
    }
    const made = createJsonGrammar(llama, schema);
    this.#grammars.set(key, made);
    made.catch(() => this.#grammars.delete(key));
    if (this.#grammars.size > GRAMMAR_CACHE) this.#grammars.delete(this.#grammars.keys().next().value ?? '');
    return made;
  }

  async embed(id: string, input: string[], signal: AbortSignal): Promise<Embedded> {
    const { model, context } = await this.#load(id);
    return llamaCppEmbed({ model, contextSize: context.contextSize, threads: this.#opts.threads, input, signal });
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
 * Grammars kept made. Making one took 0.2-1 ms here (3 ms the first time), against ~3.4 ms per
 * constrained token: worth keeping for clients that send the same schema every time.
 */
const GRAMMAR_CACHE = 64;

/**
 * Starts the first function at once and, when `spaced`, each further one a turn of the event
 * loop after the one before (else at once too). A choice under a grammar begins with llama.cpp parsing
 * the grammar again and expanding its first stacks, synchronously (12 ms at json-schema/'s
 * limits, ~90 ms for 5,000 strings of 180 characters), so n choices begun together would hold
 * the loop n times that (issue #25).
 */
function oneTurnEach(spaced: boolean): <T>(fn: () => Promise<T>) => Promise<T> {
  let last: Promise<void> | undefined;
  return (fn) => {
    if (!spaced || !last) {
      last = Promise.resolve();
      return fn();
    }
    last = last.then(() => nextTurn());
    return last.then(fn);
  };
}

function takeSequences(context: LlamaContext, n: number): LlamaContextSequence[] {
  const taken: LlamaContextSequence[] = [];
  try {
    for (let i = 0; i < n; i++) taken.push(context.getSequence());
  } catch (err) {
    for (const s of taken) s.dispose(); // or the slots' sequences are lost for good
    throw err;
  }
  return taken;
}

/** Text the consumer has not taken joins the next text or end of the same choice (one SSE chunk, one write). */
function mergeText(queued: GenerateEvent, next: GenerateEvent): GenerateEvent | undefined {
  if (queued.type !== 'text' || (next.type !== 'text' && next.type !== 'end')) return undefined;
  const logprobs = queued.logprobs && next.logprobs ? { logprobs: [...queued.logprobs, ...next.logprobs] } : {};
  return { ...next, text: queued.text + next.text, ...logprobs };
}

/**
 * A one-consumer async queue: callbacks push, the generator awaits. `merge` may combine an
 * item with the last queued item of its stream (`stream`: the choice; both not yet taken):
 * undefined keeps them apart. Items of different streams keep no order among themselves.
 */
class PushQueue<T> implements AsyncIterable<T> {
  readonly #items: T[] = [];
  readonly #merge: (queued: T, next: T) => T | undefined;
  readonly #stream: (item: T) => number;
  #done = false;
  #error: unknown;
  #wake: (() => void) | undefined;

  constructor(merge: (queued: T, next: T) => T | undefined, stream: (item: T) => number) {
    this.#merge = merge;
    this.#stream = stream;
  }

  push(item: T): void {
    const stream = this.#stream(item);
    let i = this.#items.length - 1;
    while (i >= 0 && this.#stream(this.#items[i] as T) !== stream) i--;
    const queued = this.#items[i];
    const merged = queued === undefined ? undefined : this.#merge(queued, item);
    if (merged === undefined) this.#items.push(item);
    else this.#items[i] = merged;
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
