// The direct leg of bench/llm.ts in a process of its own: a plain node-llama-cpp program (LlamaChat
// on one sequence, no HTTP) that generates when the bench asks. It runs apart from the bench so
// that it is placed and started like the orchestrators it is compared with (see bench/llm.ts).
// Settings come in the environment (BENCH_DIRECT_*); requests and answers over the IPC channel:
// { seed } in, { ttftMs, tokens, totalMs } out; the first message out is { ready, contextSize }.

import { getLlama, LlamaChat, type ChatHistoryItem } from 'node-llama-cpp';

const env = (name: string): string => {
  const v = process.env[`BENCH_DIRECT_${name}`];
  if (v === undefined) throw new Error(`BENCH_DIRECT_${name} is not set (this script is started by bench/llm.ts)`);
  return v;
};
const FILE = env('MODEL_FILE');
const PROMPT = env('PROMPT');
const MAX_TOKENS = Number(env('MAX_TOKENS'));
const THREADS = Number(env('THREADS'));
const CONTEXT = Number(env('CONTEXT'));

const llama = await getLlama({ gpu: false, build: 'never', maxThreads: THREADS });
const model = await llama.loadModel({ modelPath: FILE });
const context = await model.createContext({
  contextSize: Math.min(CONTEXT, model.trainContextSize),
  sequences: 1,
  threads: THREADS,
});

/** One generation with LlamaChat on a fresh sequence, as the orchestrator's engine runs it. */
async function run(seed: number): Promise<{ ttftMs: number; tokens: number; totalMs: number }> {
  const sequence = context.getSequence();
  const chat = new LlamaChat({ contextSequence: sequence, autoDisposeSequence: false });
  const history: ChatHistoryItem[] = [
    { type: 'user', text: PROMPT },
    { type: 'model', response: [] },
  ];
  const t0 = performance.now();
  let first = 0;
  let tokens = 0;
  await chat.generateResponse(history, {
    maxTokens: MAX_TOKENS,
    temperature: 1,
    topK: 40,
    topP: 0.95,
    seed,
    repeatPenalty: false,
    onToken: (t) => {
      tokens += t.length;
    },
    onTextChunk: () => {
      if (!first) first = performance.now();
    },
  });
  const end = performance.now();
  chat.dispose({ disposeSequence: false });
  sequence.dispose();
  return { ttftMs: first - t0, tokens, totalMs: end - t0 };
}

process.on('message', (m: { seed: number }) => {
  void run(m.seed).then((r) => process.send?.(r));
});
process.on('disconnect', () => process.exit(0));
process.send?.({ ready: true, contextSize: context.contextSize });
