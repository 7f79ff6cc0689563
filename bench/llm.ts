// Text generation benchmark (not part of `npm test`): run with `node bench/llm.ts`.
// In one run, on the same model and request:
//   1. direct node-llama-cpp generation (LlamaChat on one sequence in a plain node-llama-cpp
//      process, bench/llm-direct.ts: the best a plain node-llama-cpp program gets, no HTTP)
//   2. the same request to the orchestrator (a child process) over HTTP, no gateway
//   3. the same request through gateway (this process) + orchestrator, as in production
//      -> tokens/s ratio and added time to first token (p50) of 2 and 3 against 1
//   4. aggregate tokens/s at 1, 4 and 8 concurrent streams through the gateway
//   5. the orchestrator's RSS with the model loaded.
//   6. structured output (issue #17): the same request with a json_schema response_format against
//      it without, alternating through the gateway: tokens/s of constrained decoding as a ratio of
//      unconstrained, end to end and decode only (after the first token: a random model's JSON
//      ends after tens of tokens, so its fixed costs weigh more than on a 400-token story)
//   7. n (issue #17): one request with n: 4 against four separate concurrent requests and one.
// Targets (issue #4): ratio >= 0.95, added TTFT p50 <= 5 ms; (issue #17): structured >= 0.9 of
// unconstrained, n: 4 >= 1.3x the tokens/s.
// Options: BENCH_RUNS (rounds, default 30), BENCH_PROCESSES (processes per leg, default 3),
// BENCH_MAX_TOKENS, BENCH_MODEL / BENCH_MODEL_FILE, BENCH_MAX_NUM_SEQS (the orchestrator's
// MAX_NUM_SEQS, default 8), BENCH_STREAMS (default 1,4,8), BENCH_RAW (a file for every request's
// figures), BENCH_STRUCTURED_ROUNDS (rounds of legs 6 and 7, default 10; 0 leaves them out),
// BENCH_SCHEMA (leg 6's JSON Schema, JSON text), BENCH_STRUCTURED_MODELS (leg 6's models, default
// BENCH_MODEL and karpathy/stories260K).
//
// Fairness: every leg runs the same prompt, max_tokens, sampling (temperature 1, top_k 40,
// top_p 0.95, a seed per round, no penalties), threads and context size per sequence; the HTTP legs read the stream
// with the same client code. Each leg runs in BENCH_PROCESSES processes of its own (direct
// children, orchestrators, each with its own gateway), so no one process decides a leg and
// the direct leg does not share a process with a gateway. The legs run interleaved in a
// shuffled order (see the rounds below), so the host's drifting load hits all of them alike.
//
// Precision: one 400-token request's time varies by 10-15% (standard deviation) on this 2-vCPU
// VM, so with 90 requests a leg the ratio of one run is good to about +-1.5% (bootstrap over
// rounds). The ratio is of the legs' throughput, all tokens over all time, which varied less
// from run to run than the ratio of median tokens/s (also reported).

import http from 'node:http';
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { loadavg } from 'node:os';
import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import {
  startGateway,
  startOrchestratorProcess,
  type OrchestratorProcess,
  type TestGateway,
} from '../test/helpers/llm.ts';
import {
  DEFAULT_MAX_MODEL_LEN,
  FILE,
  MAX_NUM_SEQS,
  MAX_TOKENS,
  MODEL,
  PROCESSES,
  PROMPT,
  RUNS,
  SCHEMA,
  STREAMS,
  STREAM_INTERVAL_MS,
  STRUCTURED_MODELS,
  STRUCTURED_ROUNDS,
  THREADS,
} from './llm-settings.ts';
import { median } from './stats.ts';

interface Run {
  ttftMs: number;
  tokens: number;
  totalMs: number;
}

const tps = (r: Run): number => (r.tokens / r.totalMs) * 1000;

/**
 * A copy of `xs` in an order drawn from `seed` (Fisher-Yates over mulberry32). A fixed rotation
 * would always put the same leg after the same other leg, and what runs just before a leg (a
 * gateway still writing its ledger entry, a collection in this process) is part of its time.
 */
function shuffled<T>(xs: readonly T[], seed: number): T[] {
  let a = seed >>> 0;
  const rand = (): number => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** A bench/llm-direct.ts child with the model loaded; `run` generates once in it. */
async function startDirect(): Promise<{ child: ChildProcess; contextSize: number; run(seed: number): Promise<Run> }> {
  const child = fork(fileURLToPath(new URL('./llm-direct.ts', import.meta.url)), {
    env: {
      ...process.env,
      BENCH_DIRECT_MODEL_FILE: FILE,
      BENCH_DIRECT_PROMPT: PROMPT,
      BENCH_DIRECT_MAX_TOKENS: String(MAX_TOKENS),
      BENCH_DIRECT_THREADS: String(THREADS),
      BENCH_DIRECT_CONTEXT: String(DEFAULT_MAX_MODEL_LEN),
    },
  });
  // Its next message; a child that dies instead fails the bench rather than hanging it.
  // The loser's listeners are removed (abort), or they pile up on the child, one set per request.
  const reply = async <T>(): Promise<T> => {
    const done = new AbortController();
    const { signal } = done;
    try {
      const exited = once(child, 'exit', { signal }).then(() => {
        throw new Error('the direct process exited');
      });
      const [m] = (await Promise.race([once(child, 'message', { signal }), exited])) as [T];
      return m;
    } finally {
      done.abort();
    }
  };
  const ready = await reply<{ contextSize: number }>();
  return {
    child,
    contextSize: ready.contextSize,
    async run(seed) {
      child.send({ seed });
      return reply<Run>();
    },
  };
}

/**
 * One streamed request over HTTP; the client reads every chunk and takes usage from the end.
 * A plain node:http client with keep-alive: on this 2-core host the client's own CPU shares the
 * cores with the engine, and fetch (web streams) took 10.4 ms of CPU per 400-token stream
 * against 6.7 ms for this, time the HTTP legs were charged for that is no part of the service.
 */
async function httpRun(url: string, headers: Record<string, string>, seed: number, extra: object = {}): Promise<Run> {
  const body = JSON.stringify({
    model: MODEL,
    messages: [{ role: 'user', content: PROMPT }],
    max_tokens: MAX_TOKENS,
    temperature: 1,
    // node-llama-cpp's defaults, which the direct leg's LlamaChat cannot turn off: the service's
    // own defaults are OpenAI's (no top-k, top_p 1), slower on a 32,000-token vocabulary.
    top_k: 40,
    top_p: 0.95,
    seed,
    stream: true,
    // The gateway streams usage only when asked (issue #17); an orchestrator always does.
    stream_options: { include_usage: true },
    ...extra,
  });
  const t0 = performance.now();
  return new Promise<Run>((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers },
      },
      (res) => {
        let first = 0;
        let tail = Buffer.alloc(0);
        res.on('data', (c: Buffer) => {
          if (!first) first = performance.now();
          // The usage chunk and [DONE] end the stream: the last bytes are enough to read it.
          tail = tail.length + c.length > 4096 ? Buffer.concat([tail, c]).subarray(-4096) : Buffer.concat([tail, c]);
        });
        res.on('end', () => {
          const end = performance.now();
          const text = tail.toString();
          if (res.statusCode !== 200) return reject(new Error(`${url} answered ${res.statusCode}: ${text}`));
          // Summed over the choices when n > 1.
          const usage = /"completion_tokens":(\d+)/.exec(text);
          resolve({ ttftMs: first - t0, tokens: Number(usage?.[1] ?? 0), totalMs: end - t0 });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
const agent = new http.Agent({ keepAlive: true });

async function rssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

// tokPerSec: the leg's throughput, all its tokens over all its time (medianTokPerSec beside it).
const summary = (runs: Run[]): { tokPerSec: number; medianTokPerSec: number; ttftP50Ms: number; tokens: number } => ({
  tokPerSec: Math.round((runs.reduce((s, r) => s + r.tokens, 0) / runs.reduce((s, r) => s + r.totalMs, 0)) * 1000),
  medianTokPerSec: Math.round(median(runs.map(tps))),
  ttftP50Ms: +median(runs.map((r) => r.ttftMs)).toFixed(2),
  tokens: median(runs.map((r) => r.tokens)),
});

/** Tokens after the first over the time after it: the decode rate, without prompt and HTTP costs. */
const decodeTokPerSec = (runs: Run[]): number =>
  Math.round(
    (runs.reduce((s, r) => s + Math.max(0, r.tokens - 1), 0) / runs.reduce((s, r) => s + (r.totalMs - r.ttftMs), 0)) *
      1000,
  );
const ratio = (a: number, b: number): number => +(a / b).toFixed(3);

/**
 * Leg 6: the request with and without a json_schema response_format, back to back in a shuffled
 * order each round (the same seed for both), through one gateway.
 */
async function structuredLeg(url: string, headers: Record<string, string>, model: string): Promise<object> {
  const format = {
    model,
    response_format: { type: 'json_schema', json_schema: { name: 'bench', strict: true, schema: SCHEMA } },
  };
  const runs: Record<'plain' | 'structured', Run[]> = { plain: [], structured: [] };
  // Warm-up: a model other than MODEL loads on its first request.
  for (const extra of [{ model }, format]) await httpRun(url, headers, 999, extra);
  for (let i = 1; i <= STRUCTURED_ROUNDS; i++)
    for (const leg of shuffled(['plain', 'structured'] as const, 0x20000 + i))
      runs[leg].push(await httpRun(url, headers, 1000 + i, leg === 'structured' ? format : { model }));
  const plain = summary(runs.plain);
  const structured = summary(runs.structured);
  return {
    plain: { ...plain, decodeTokPerSec: decodeTokPerSec(runs.plain) },
    structured: { ...structured, decodeTokPerSec: decodeTokPerSec(runs.structured) },
    throughputRatio: ratio(structured.tokPerSec, plain.tokPerSec),
    decodeRatio: ratio(decodeTokPerSec(runs.structured), decodeTokPerSec(runs.plain)),
  };
}

/** Leg 7: aggregate tokens/s of one request with n: 4, four separate concurrent requests, and one request. */
async function nLeg(url: string, headers: Record<string, string>): Promise<object> {
  const rates: Record<'n4' | 'four' | 'one', number[]> = { n4: [], four: [], one: [] };
  const rate = async (requests: () => Promise<Run[]>): Promise<number> => {
    const t0 = performance.now();
    const all = await requests();
    return all.reduce((s, r) => s + r.tokens, 0) / ((performance.now() - t0) / 1000);
  };
  for (let i = 1; i <= STRUCTURED_ROUNDS; i++) {
    const seed = 2000 + 10 * i;
    const legs = {
      n4: () => rate(async () => [await httpRun(url, headers, seed, { n: 4 })]),
      four: () => rate(() => Promise.all([0, 1, 2, 3].map((k) => httpRun(url, headers, seed + k)))),
      one: () => rate(async () => [await httpRun(url, headers, seed)]),
    };
    for (const leg of shuffled(['n4', 'four', 'one'] as const, 0x30000 + i)) rates[leg].push(await legs[leg]());
  }
  const tokPerSec = {
    n4: Math.round(median(rates.n4)),
    four: Math.round(median(rates.four)),
    one: Math.round(median(rates.one)),
  };
  return {
    medianTokPerSec: tokPerSec,
    n4OverFourRequests: ratio(tokPerSec.n4, tokPerSec.four),
    n4OverOneRequest: ratio(tokPerSec.n4, tokPerSec.one),
    fourRequestsOverOne: ratio(tokPerSec.four, tokPerSec.one),
  };
}

type Leg = 'direct' | 'orchestrator' | 'gateway';
const LEGS: Leg[] = ['direct', 'orchestrator', 'gateway'];

const loadBefore = loadavg()[0] ?? 0;
const directs: Array<Awaited<ReturnType<typeof startDirect>>> = [];
const orchs: OrchestratorProcess[] = [];
const gateways: TestGateway[] = [];
try {
  // One at a time: a model loading beside another would make start-up, not the runs, noisy.
  for (let k = 0; k < PROCESSES; k++) {
    directs.push(await startDirect());
    const orch = await startOrchestratorProcess({
      MEDIAPLANE_ORCHESTRATOR_MODELS: MODEL,
      MAX_NUM_SEQS: String(MAX_NUM_SEQS),
      MEDIAPLANE_LLM_THREADS: String(THREADS),
      MEDIAPLANE_ORCHESTRATOR_STREAM_INTERVAL_MS: String(STREAM_INTERVAL_MS),
      MEDIAPLANE_LOG_LEVEL: 'warn',
    });
    orchs.push(orch);
    gateways.push(await startGateway({ orchestrators: [orch.url] }));
  }
  const rssLoaded = await Promise.all(orchs.map((o) => rssMb(o.child.pid ?? 0)));
  // Each process index's three legs: legs[k][leg](seed).
  const legs: Array<Record<Leg, (seed: number) => Promise<Run>>> = [];
  for (let k = 0; k < PROCESSES; k++) {
    const orch = orchs[k]!;
    const gw = gateways[k]!;
    const key = await gw.owner('bench');
    legs.push({
      direct: (seed) => directs[k]!.run(seed),
      orchestrator: (seed) => httpRun(`${orch.url}/v1/chat/completions`, {}, seed),
      gateway: (seed) => httpRun(`${gw.url}/llm`, { authorization: `Bearer ${key}` }, seed),
    });
  }
  // runs[leg][k][round]
  const runs = Object.fromEntries(LEGS.map((l) => [l, Array.from({ length: PROCESSES }, (): Run[] => [])])) as Record<
    Leg,
    Run[][]
  >;
  for (let w = 0; w < 2; w++) for (const ls of legs) for (const l of LEGS) await ls[l](w); // warm-up
  // A round runs every process index's three legs back to back, as a triplet; the triplets and
  // the legs within each are in a shuffled order. One request's time is correlated with the
  // next one's (lag-1 autocorrelation ~0.5 here: the host's load drifts), so the legs of a
  // triplet meet nearly the same host, and the paired ratio compares them.
  for (let i = 1; i <= RUNS; i++) {
    for (const k of shuffled([...legs.keys()], i)) {
      // Seeds apart from the rounds' (1..RUNS), so the two orders are not the same draw.
      for (const l of shuffled(LEGS, 0x10000 + i * PROCESSES + k)) runs[l][k]!.push(await legs[k]![l](i));
    }
  }

  const aggregate: Record<string, number> = {};
  const gw0 = gateways[0]!;
  const key0 = await gw0.owner('aggregate');
  for (const n of STREAMS) {
    const rounds: number[] = [];
    for (let round = 0; round < 3; round++) {
      const t0 = performance.now();
      const all = await Promise.all(
        Array.from({ length: n }, (_, i) =>
          httpRun(`${gw0.url}/llm`, { authorization: `Bearer ${key0}` }, 100 * (round + 1) + i),
        ),
      );
      rounds.push(all.reduce((s, r) => s + r.tokens, 0) / ((performance.now() - t0) / 1000));
    }
    aggregate[`${n} streams`] = Math.round(median(rounds));
  }
  const issue17: Record<string, object> = {};
  if (STRUCTURED_ROUNDS > 0) {
    const key = await gw0.owner('issue17');
    const headers = { authorization: `Bearer ${key}` };
    const structured: Record<string, object> = {};
    for (const model of STRUCTURED_MODELS) structured[model] = await structuredLeg(`${gw0.url}/llm`, headers, model);
    issue17.structuredOutput = structured;
    issue17.n = await nLeg(`${gw0.url}/llm`, headers);
  }
  const rssAfter = await rssMb(orchs[0]?.child.pid ?? 0);

  const all = (leg: Leg): Run[] => runs[leg].flat();
  const d = summary(all('direct'));
  const o = summary(all('orchestrator'));
  const g = summary(all('gateway'));
  // Pairs: the same round and process index (one triplet), so both ran the same seed back to back.
  const pairs = (leg: Leg): number[] =>
    runs[leg].flatMap((rs, k) => rs.map((r, i) => tps(r) / tps(runs.direct[k]?.[i] ?? r)));
  const report = {
    model: MODEL,
    maxTokens: MAX_TOKENS,
    runs: RUNS,
    processesPerLeg: PROCESSES,
    streamIntervalMs: STREAM_INTERVAL_MS,
    threads: THREADS,
    contextPerSequence: directs[0]?.contextSize,
    orchestratorMaxNumSeqs: MAX_NUM_SEQS,
    direct: d,
    orchestratorOverHttp: o,
    gateway: g,
    throughputRatio: +(g.tokPerSec / d.tokPerSec).toFixed(3),
    ratioOfMedians: +(g.medianTokPerSec / d.medianTokPerSec).toFixed(3),
    // The median of the gateway/direct ratios of each triplet: the two ran back to back.
    pairedThroughputRatio: +median(pairs('gateway')).toFixed(3),
    addedTtftP50Ms: +(g.ttftP50Ms - d.ttftP50Ms).toFixed(2),
    orchestratorOnly: {
      throughputRatio: +(o.tokPerSec / d.tokPerSec).toFixed(3),
      pairedThroughputRatio: +median(pairs('orchestrator')).toFixed(3),
      addedTtftP50Ms: +(o.ttftP50Ms - d.ttftP50Ms).toFixed(2),
    },
    // Each process's median tok/s: with 30 requests each, identical processes differ by a few %.
    tokPerSecByProcess: Object.fromEntries(LEGS.map((l) => [l, runs[l].map((rs) => Math.round(median(rs.map(tps))))])),
    aggregateTokPerSec: aggregate,
    ...issue17,
    orchestratorRssMb: { modelLoaded: rssLoaded.map((x) => +x.toFixed(1)), afterRuns: +rssAfter.toFixed(1) },
    hostLoadAvg1m: { before: +loadBefore.toFixed(2), after: +(loadavg()[0] ?? 0).toFixed(2) },
    targets: {
      throughputRatio: '>= 0.95',
      addedTtftP50Ms: '<= 5',
      'structuredOutput[model].throughputRatio': '>= 0.9',
      'n.n4OverFourRequests': '>= 1.3',
    },
  };
  console.log(JSON.stringify(report, null, 2));
  // Every request's figures, runs[leg][process][round], for analysis beyond this report.
  if (process.env.BENCH_RAW) await writeFile(process.env.BENCH_RAW, JSON.stringify(runs));
} finally {
  for (const gw of gateways) await gw.close();
  for (const o of orchs) await o.kill();
  for (const d of directs) d.child.disconnect();
}
