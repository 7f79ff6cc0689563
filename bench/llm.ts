// Text generation benchmark (not part of `npm test`): run with `node bench/llm.ts`.
// In one run, on the same model and request:
//   1. direct node-llama-cpp generation (LlamaChat in this process, 1 sequence)
//   2. the same request through gateway (this process) + orchestrator (a child process)
//      -> tokens/s ratio and added time to first token (p50)
//   3. aggregate tokens/s at 1, 4 and 8 concurrent streams through the gateway
//   4. the orchestrator's RSS with the model loaded.
// Targets (issue #4): ratio >= 0.95, added TTFT p50 <= 5 ms.

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { getLlama, LlamaChat, type ChatHistoryItem } from 'node-llama-cpp';
import { MODELS_DIR, startGateway, startOrchestratorProcess, TINY } from '../test/helpers/llm.ts';

const MODEL = process.env.BENCH_MODEL ?? TINY;
const FILE = process.env.BENCH_MODEL_FILE ?? join(MODELS_DIR, TINY, 'llama-2-tiny-random.gguf');
const MAX_TOKENS = Number(process.env.BENCH_MAX_TOKENS ?? 400);
const RUNS = Number(process.env.BENCH_RUNS ?? 12);
const THREADS = Number(process.env.MEDIAPLANE_LLM_THREADS ?? 1);
const PROMPT = 'Tell me a long story about a llama.';

interface Run {
  ttftMs: number;
  tokens: number;
  totalMs: number;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] ?? 0) : ((s[m - 1] ?? 0) + (s[m] ?? 0)) / 2;
};
const tps = (r: Run): number => (r.tokens / r.totalMs) * 1000;

async function direct(): Promise<Run[]> {
  const llama = await getLlama({ gpu: false, build: 'never', maxThreads: THREADS });
  const model = await llama.loadModel({ modelPath: FILE });
  const context = await model.createContext({ contextSize: 4096, sequences: 1, threads: THREADS });
  const runs: Run[] = [];
  for (let i = 0; i < RUNS + 1; i++) {
    const sequence = context.getSequence();
    const chat = new LlamaChat({ contextSequence: sequence, autoDisposeSequence: false });
    const history: ChatHistoryItem[] = [{ type: 'user', text: PROMPT }, { type: 'model', response: [] }];
    const t0 = performance.now();
    let first = 0;
    let tokens = 0;
    await chat.generateResponse(history, {
      maxTokens: MAX_TOKENS, temperature: 1, seed: i, repeatPenalty: false,
      onToken: (t) => { tokens += t.length; },
      onTextChunk: () => { if (!first) first = performance.now(); },
    });
    const end = performance.now();
    chat.dispose({ disposeSequence: false });
    sequence.dispose();
    if (i > 0) runs.push({ ttftMs: first - t0, tokens, totalMs: end - t0 }); // first run warms up
  }
  await context.dispose();
  await model.dispose();
  await llama.dispose();
  return runs;
}

async function viaGateway(url: string, key: string, seed: number): Promise<Run> {
  const t0 = performance.now();
  const res = await fetch(`${url}/llm`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: PROMPT }], max_tokens: MAX_TOKENS, temperature: 1, seed, stream: true }),
  });
  if (res.status !== 200 || !res.body) throw new Error(`gateway answered ${res.status}: ${await res.text()}`);
  let first = 0;
  let text = '';
  const dec = new TextDecoder();
  for await (const c of res.body) {
    if (!first) first = performance.now();
    text += dec.decode(c, { stream: true });
  }
  const end = performance.now();
  const usage = /"completion_tokens":(\d+)/.exec(text);
  return { ttftMs: first - t0, tokens: Number(usage?.[1] ?? 0), totalMs: end - t0 };
}

async function rssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

const d = await direct();
const orch = await startOrchestratorProcess({ MEDIAPLANE_ORCHESTRATOR_MODELS: MODEL, MAX_NUM_SEQS: '8', MEDIAPLANE_LLM_THREADS: String(THREADS), MEDIAPLANE_LOG_LEVEL: 'warn' });
const gw = await startGateway({ orchestrators: [orch.url] });
try {
  const key = await gw.owner('bench');
  const rssLoaded = await rssMb(orch.child.pid ?? 0);
  await viaGateway(gw.url, key, 0); // warm-up
  const g: Run[] = [];
  for (let i = 1; i <= RUNS; i++) g.push(await viaGateway(gw.url, key, i));

  const aggregate: Record<number, number> = {};
  for (const n of [1, 4, 8]) {
    const t0 = performance.now();
    const runs = await Promise.all(Array.from({ length: n }, (_, i) => viaGateway(gw.url, key, 100 + i)));
    const secs = (performance.now() - t0) / 1000;
    aggregate[n] = runs.reduce((s, r) => s + r.tokens, 0) / secs;
  }
  const rssAfter = await rssMb(orch.child.pid ?? 0);

  const dTps = median(d.map(tps));
  const gTps = median(g.map(tps));
  const report = {
    model: MODEL, maxTokens: MAX_TOKENS, runs: RUNS, threads: THREADS,
    direct: { tokPerSec: Math.round(dTps), ttftP50Ms: +median(d.map((r) => r.ttftMs)).toFixed(2), tokens: median(d.map((r) => r.tokens)) },
    gateway: { tokPerSec: Math.round(gTps), ttftP50Ms: +median(g.map((r) => r.ttftMs)).toFixed(2), tokens: median(g.map((r) => r.tokens)) },
    throughputRatio: +(gTps / dTps).toFixed(3),
    addedTtftP50Ms: +(median(g.map((r) => r.ttftMs)) - median(d.map((r) => r.ttftMs))).toFixed(2),
    aggregateTokPerSec: Object.fromEntries(Object.entries(aggregate).map(([k, v]) => [`${k} streams`, Math.round(v)])),
    orchestratorRssMb: { modelLoaded: +rssLoaded.toFixed(1), afterRuns: +rssAfter.toFixed(1) },
    targets: { throughputRatio: '>= 0.95', addedTtftP50Ms: '<= 5' },
  };
  console.log(JSON.stringify(report, null, 2));
} finally {
  await gw.close();
  await orch.kill();
}
