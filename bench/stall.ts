// Event-loop stalls from hostile JSON schemas (issue #25, hole 1), not part of `npm test`:
//   node bench/stall.ts      (npm run bench:stall)
//
// One server with the API, gateway and orchestrator roles in this process (as `mediaplane
// start` runs them, tiny-random-llama-2 on the CPU). Each case sends its request to
// /v1/chat/completions BENCH_RUNS times (default 3), one at a time, while
//   - perf_hooks.monitorEventLoopDelay samples this process's event loop every 1 ms, and
//   - a poller in a worker thread (a client with an event loop of its own) sends GET /healthz
//     one after another, 10 ms apart,
// and prints per run: the status, the request's time, the worst event-loop delay and the
// slowest /healthz answer. The design goal (issue #25) is no request holding the loop for more
// than 200 ms.
//
// The cases are the worst requests of hole 1 and what its fix bounds: the reproduction (a oneOf
// of two enums of 6,000 values) and the same at 1 MiB; the largest enum the limits accept (2,000
// strings of 59 characters, MAX_ALTERNATIVES and MAX_TEXT of engines/llamacpp/json-schema/shape.ts), with n 1 and 4;
// four enums of 500 of those in one object; a forced tool call with n 4 (its parameters are also shown to
// the model in the prompt, so only 100 of those values fit the context); 0.9 MB of enum strings
// (refused) beside a message of the same text (no schema: the cost of tokenizing it); $refs two
// ways to the next def 24 deep; 100,000 required names; a oneOf of 400 objects told apart by a
// const. BENCH_CASES (names, comma-separated) picks some; BENCH_DAG_DEPTH (24) and
// BENCH_REPRO_VALUES (6000) size two of them, so that a build without the fix finishes (the
// 1 MiB reproduction took minutes there).
//
// The bench's own work (sending a 1 MiB body, reading answers) runs on the same loop; it is
// small beside the figures (a request of a small schema shows it).

import { once } from 'node:events';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { MODELS_DIR, TINY } from '../test/helpers/llm.ts';
import { startTestServer } from '../test/helpers/server.ts';

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const DAG_DEPTH = Number(process.env.BENCH_DAG_DEPTH ?? 24);
const REPRO_VALUES = Number(process.env.BENCH_REPRO_VALUES ?? 6000);
const ONLY = process.env.BENCH_CASES?.split(',');

const range = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);
const format = (schema: object) => ({ type: 'json_schema', json_schema: { name: 'x', schema } });
const chat = (extra: object) => ({
  model: TINY,
  messages: [{ role: 'user', content: 'Pick one.' }],
  max_tokens: 256,
  temperature: 1,
  seed: 1,
  ...extra,
});

/** The largest enum the limits accept: 2,000 strings of 59 characters (MAX_ALTERNATIVES, MAX_TEXT). */
const bigEnum = range(0, 2000).map((i) => `${i}`.padEnd(59, 'x'));
/** 0.9 MB of enum strings (180 characters each), over MAX_TEXT. */
const longEnum = range(0, 4980).map((i) => `${i}`.padEnd(180, 'x'));
/** Values for each of two enums so that the body is just under 1 MiB. */
const MIB_VALUES = 80_000;

function dag(depth: number): object {
  const defs: Record<string, object> = {};
  for (let i = 0; i < depth; i++)
    defs[`a${i}`] = { anyOf: [{ $ref: `#/$defs/a${i + 1}` }, { $ref: `#/$defs/a${i + 1}` }] };
  defs[`a${depth}`] = { const: 1 };
  return { oneOf: [{ $ref: '#/$defs/a0' }, { const: 2 }], $defs: defs };
}

const CASES: Record<string, () => object> = {
  small: () => chat({ response_format: format({ enum: ['a', 'b'] }), max_tokens: 16 }),
  repro: () =>
    chat({
      response_format: format({
        oneOf: [{ enum: range(0, REPRO_VALUES) }, { enum: range(REPRO_VALUES, REPRO_VALUES) }],
      }),
    }),
  repro1MiB: () =>
    chat({
      response_format: format({ oneOf: [{ enum: range(0, MIB_VALUES) }, { enum: range(MIB_VALUES, MIB_VALUES) }] }),
    }),
  bigEnum: () => chat({ response_format: format({ enum: bigEnum }) }),
  bigEnumN4: () => chat({ response_format: format({ enum: bigEnum }), n: 4 }),
  manyEnums: () =>
    chat({
      response_format: format({
        type: 'object',
        properties: Object.fromEntries(range(0, 4).map((k) => [`p${k}`, { enum: bigEnum.slice(0, 500) }])),
        required: range(0, 4).map((k) => `p${k}`),
      }),
      max_tokens: 400,
    }),
  longEnum: () => chat({ response_format: format({ enum: longEnum }) }),
  longMessage: () => chat({ messages: [{ role: 'user', content: longEnum.join(' ') }] }),
  bigEnumTool: () =>
    chat({
      n: 4,
      tools: [
        {
          type: 'function',
          function: {
            name: 'pick',
            parameters: { type: 'object', properties: { v: { enum: bigEnum.slice(0, 100) } }, required: ['v'] },
          },
        },
      ],
      tool_choice: 'required',
      max_tokens: 300,
    }),
  dag: () => chat({ response_format: format(dag(DAG_DEPTH)) }),
  required: () =>
    chat({ response_format: format({ type: 'object', required: range(0, 100_000).map((i) => `k${i}`) }) }),
  tagged: () =>
    chat({
      response_format: format({
        oneOf: range(0, 400).map((i) => ({ type: 'object', properties: { t: { const: i } }, required: ['t'] })),
      }),
    }),
};

interface Run {
  status: number;
  requestMs: number;
  loopMaxMs: number;
  healthzMaxMs: number;
}

/**
 * Polls /healthz one after another until stopped, from a worker thread (an event loop of its
 * own, as another client's): the slowest answer.
 */
function pollHealthz(url: string): { ready: Promise<unknown>; stop(): Promise<number> } {
  const worker = new Worker(POLLER, { eval: true, workerData: { url } });
  const ready = once(worker, 'message');
  return {
    ready,
    async stop() {
      worker.postMessage('stop');
      const [worst] = (await once(worker, 'message')) as [number];
      await worker.terminate();
      return worst;
    },
  };
}

const POLLER = `
const { parentPort, workerData } = require('node:worker_threads');
let running = true;
let worst = 0;
parentPort.on('message', () => { running = false; });
(async () => {
  await (await fetch(workerData.url + '/healthz')).arrayBuffer();
  parentPort.postMessage('ready');
  while (running) {
    const t = performance.now();
    try {
      await (await fetch(workerData.url + '/healthz')).arrayBuffer();
    } catch {
      // A connection the server closed while its loop was held (its keep-alive timer fired late): the next poll opens another.
    }
    worst = Math.max(worst, performance.now() - t);
    await new Promise((r) => setTimeout(r, 10));
  }
  parentPort.postMessage(worst);
})();
`;

async function runOnce(url: string, key: string, body: string): Promise<Run> {
  const delay = monitorEventLoopDelay({ resolution: 1 });
  const poller = pollHealthz(url);
  await poller.ready;
  delay.enable();
  const t = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body,
  });
  const text = await res.text();
  const requestMs = performance.now() - t;
  await sleep(50);
  delay.disable();
  const healthzMaxMs = await poller.stop();
  if (res.status >= 400 && process.env.BENCH_VERBOSE) console.log(`  ${text.slice(0, 300)}`);
  return { status: res.status, requestMs, loopMaxMs: delay.max / 1e6, healthzMaxMs };
}

const server = await startTestServer({
  roles: { api: true, worker: false, gateway: true, orchestrator: true },
  settings: {
    modelsDir: MODELS_DIR,
    orchestratorModels: [TINY],
    gatewayPollMs: 60_000,
    logLevel: 'warn',
    maxNumSeqs: 4,
  },
});
try {
  const key = await server.key('bench');
  console.log('case          bytes      runs: status request-ms loop-max-ms healthz-max-ms');
  // The message case stalls on tokenizing a long prompt, which no schema is part of.
  const worst: number[] = [];
  for (const [name, make] of Object.entries(CASES)) {
    if (ONLY && !ONLY.includes(name)) continue;
    const body = JSON.stringify(make());
    const runs: Run[] = [];
    for (let i = 0; i < RUNS; i++) runs.push(await runOnce(server.url, key, body));
    const cells = runs.map(
      (r) => `${r.status} ${r.requestMs.toFixed(0)} ${r.loopMaxMs.toFixed(0)} ${r.healthzMaxMs.toFixed(0)}`,
    );
    if (name !== 'longMessage') worst.push(...runs.map((r) => r.loopMaxMs));
    console.log(`${name.padEnd(13)} ${String(body.length).padStart(9)}  ${cells.join(' | ')}`);
  }
  console.log(`worst event-loop stall of the schema cases: ${Math.max(...worst).toFixed(0)} ms (goal: 200 ms)`);
} finally {
  await server.stop();
}
