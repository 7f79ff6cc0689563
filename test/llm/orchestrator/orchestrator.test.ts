// The orchestrator on its own: tuning variables checked against the GGUF header (in process
// and as a real process that must stop), capacity with a short queue then 503, prompt limits,
// and the vLLM engine's flag mapping and process handling with a fake vLLM.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startOrchestrator } from '../../../src/llm/orchestrator/index.ts';
import { vllmArgs } from '../../../src/llm/orchestrator/engines/vllm/index.ts';
import { checkTuning, readGgufMeta } from '../../../src/llm/orchestrator/tuning.ts';
import { createEngine } from '../../../src/llm/orchestrator/engines/index.ts';
import type { GenerateEvent } from '../../../src/llm/orchestrator/engine.ts';
import { chunk, chunkEncoder } from '../../../src/llm/protocol/index.ts';
import { formatSse } from '../../../src/lib/sse.ts';
import { loadConfig } from '../../../src/config/index.ts';
import { downloadFromHub } from '../../../src/llm/orchestrator/models.ts';
import {
  MODELS_DIR,
  orchestratorFailure,
  quietLog,
  readSse,
  sampleSum,
  STORIES,
  testConfig,
  TINY,
} from '../../helpers/llm.ts';
import { orchestratorOptions, tuningFromConfig } from '../../../src/main.ts';

const body = (extra: object = {}): string =>
  JSON.stringify({ model: TINY, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4, ...extra });

test('GGUF metadata: layers, heads and trained context of the shared models', async () => {
  assert.deepEqual(await readGgufMeta(join(MODELS_DIR, STORIES, 'stories260K.gguf')), {
    architecture: 'llama',
    layers: 5,
    attentionHeads: 8,
    trainedContext: 2048,
  });
  assert.deepEqual(await readGgufMeta(join(MODELS_DIR, TINY, 'llama-2-tiny-random.gguf')), {
    architecture: 'llama',
    layers: 1,
    attentionHeads: 2,
    trainedContext: 4096,
  });
});

test('tuning rules: each bad variable is named with its rule; a default MAX_MODEL_LEN follows the model', () => {
  const meta = { architecture: 'llama', layers: 5, attentionHeads: 8, trainedContext: 2048 };
  const t = tuningFromConfig(testConfig());
  assert.equal(checkTuning(STORIES, t, meta).maxModelLen, 2048, 'default 8192 capped to the trained 2048');
  const bad = {
    ...t,
    tensorParallelSize: 3,
    pipelineParallelSize: 6,
    maxModelLen: 4096,
    maxModelLenIsDefault: false,
    maxNumBatchedTokens: 1024,
  };
  assert.throws(
    () => checkTuning(STORIES, bad, meta),
    (err: Error) => {
      assert.match(err.message, /TENSOR_PARALLEL_SIZE=3: must divide the model's number of attention heads \(8\)/);
      assert.match(err.message, /PIPELINE_PARALLEL_SIZE=6: must be <= the model's number of layers \(5\)/);
      assert.match(err.message, /MAX_MODEL_LEN=4096: must be <= the model's trained context \(2048 tokens\)/);
      return true;
    },
  );
  assert.throws(
    () =>
      checkTuning(STORIES, { ...t, maxModelLen: 1024, maxModelLenIsDefault: false, maxNumBatchedTokens: 512 }, meta),
    /MAX_NUM_BATCHED_TOKENS=512: must be >= MAX_MODEL_LEN \(1024\)/,
  );
});

test('MAX_MODEL_LEN=8192 set explicitly is refused on a smaller model; left unset it follows the model', () => {
  const meta = { architecture: 'llama', layers: 1, attentionHeads: 2, trainedContext: 4096 };
  const unset = tuningFromConfig(loadConfig({ env: {} }));
  assert.equal(unset.maxModelLen, 8192);
  assert.equal(checkTuning(TINY, unset, meta).maxModelLen, 4096, 'the default follows the trained context');
  const explicit = tuningFromConfig(loadConfig({ env: { MAX_MODEL_LEN: '8192' } }));
  assert.equal(explicit.maxModelLenIsDefault, false);
  assert.throws(
    () => checkTuning(TINY, explicit, meta),
    /MAX_MODEL_LEN=8192: must be <= the model's trained context \(4096 tokens\)/,
  );
});

test('bad tuning variables stop a real orchestrator process with the message', async () => {
  const tp = await orchestratorFailure({ MEDIAPLANE_ORCHESTRATOR_MODELS: TINY, TENSOR_PARALLEL_SIZE: '3' });
  assert.equal(tp.code, 1);
  assert.match(
    tp.stderr,
    /TENSOR_PARALLEL_SIZE=3: must divide the model's number of attention heads \(2\) \[stas\/tiny-random-llama-2\]/,
  );
  const dflt = await orchestratorFailure({ MEDIAPLANE_ORCHESTRATOR_MODELS: TINY, MAX_MODEL_LEN: '8192' });
  assert.equal(dflt.code, 1, 'an explicit MAX_MODEL_LEN equal to the default is checked too');
  assert.match(
    dflt.stderr,
    /MAX_MODEL_LEN=8192: must be <= the model's trained context \(4096 tokens\) \[stas\/tiny-random-llama-2\]/,
  );
  const len = await orchestratorFailure({ MEDIAPLANE_ORCHESTRATOR_MODELS: STORIES, MAX_MODEL_LEN: '3000' });
  assert.equal(len.code, 1);
  assert.match(
    len.stderr,
    /MAX_MODEL_LEN=3000: must be <= the model's trained context \(2048 tokens\) \[karpathy\/stories260K\]/,
  );
  const gpu = await orchestratorFailure({ GPU_MEMORY_UTILIZATION: '1.5' });
  assert.match(gpu.stderr, /GPU_MEMORY_UTILIZATION="1.5": must be <= 1/);
});

test('beyond MAX_NUM_SEQS a request waits briefly, then 503; a prompt over the context is 400', async () => {
  // The first request must still hold the only sequence when the second has waited its
  // 150 ms: it asks for 2000 tokens (about 1 s at the fastest measured speed), so the check
  // does not depend on how slow generation happens to be. (Not more than the context leaves
  // after the prompt: that is refused, issue #17.)
  const o = await startOrchestrator({
    options: orchestratorOptions(
      testConfig({
        orchestratorModels: [TINY],
        maxNumSeqs: 1,
        orchestratorQueueMs: 150,
        maxModelLen: 2048,
        maxNumBatchedTokens: 2048,
      }),
    ),
    log: quietLog,
  });
  try {
    const caps = (await (await fetch(`${o.url}/capabilities`)).json()) as any;
    assert.deepEqual(
      caps.models.find((m: any) => m.id === TINY),
      { id: TINY, warm: true, contextLength: 2048, free: 1, total: 1, queued: 0 },
    );
    const cold = caps.models.find((m: any) => m.id === STORIES);
    assert.equal(cold.warm, false);
    const long = fetch(`${o.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: body({ max_tokens: 2000 }),
    });
    const first = await long;
    assert.equal(first.status, 200);
    const busy = await fetch(`${o.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: body(),
    });
    assert.equal(busy.status, 503);
    assert.match(((await busy.json()) as any).error.message, /busy/);
    // Its own GET /metrics (no secret needed, as the API's): the sequence is taken.
    const during = await (await fetch(`${o.url}/metrics`)).text();
    assert.equal(sampleSum(during, 'mediaplane_orchestrator_sequences_free', { model: TINY }), 0);
    assert.equal(sampleSum(during, 'mediaplane_orchestrator_requests_active'), 1);
    assert.equal(sampleSum(during, 'mediaplane_orchestrator_model_warm', { model: STORIES }), 0);
    assert.ok(sampleSum(during, 'mediaplane_process_resident_memory_bytes') > 50e6, 'RSS with the model loaded');
    const events = await readSse(first);
    assert.equal(events.at(-1)?.data, '[DONE]');
    const usage = JSON.parse(events.at(-2)?.data ?? '{}').usage;
    assert.ok(usage.completion_tokens <= 2000 && usage.total_tokens <= 2048, 'within max_tokens and the context');
    const done = await (await fetch(`${o.url}/metrics`)).text();
    assert.equal(sampleSum(done, 'mediaplane_orchestrator_tokens_computed_total'), usage.completion_tokens);
    assert.equal(sampleSum(done, 'mediaplane_orchestrator_sequences_free', { model: TINY }), 1);
    const huge = await fetch(`${o.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: TINY, messages: [{ role: 'user', content: 'word '.repeat(2100) }] }),
    });
    assert.equal(huge.status, 400);
    assert.match(((await huge.json()) as any).error.message, /prompt is \d+ tokens/);
  } finally {
    await o.close();
  }
});

test('an absent model with the hub unreachable fails with a clear message', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'mp-models-'));
  try {
    await assert.rejects(
      downloadFromHub({ hubUrl: 'http://127.0.0.1:9', dir, id: 'acme/nothing', use8bit: false }),
      /model acme\/nothing is not in .* and the model hub http:\/\/127\.0\.0\.1:9 cannot be reached .*put a GGUF file in/,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('vLLM flags: every tuning variable maps to its vLLM flag', () => {
  const args = vllmArgs({
    model: '/m/acme/llm',
    servedName: 'acme/llm',
    port: 9999,
    tuning: {
      use8bit: true,
      pipelineParallelSize: 2,
      tensorParallelSize: 4,
      maxModelLen: 4096,
      maxNumBatchedTokens: 8192,
      maxNumSeqs: 64,
      gpuMemoryUtilization: 0.9,
    },
  });
  assert.deepEqual(args, [
    '/m/acme/llm',
    '--host',
    '127.0.0.1',
    '--port',
    '9999',
    '--served-model-name',
    'acme/llm',
    '--tensor-parallel-size',
    '4',
    '--pipeline-parallel-size',
    '2',
    '--max-model-len',
    '4096',
    '--max-num-batched-tokens',
    '8192',
    '--max-num-seqs',
    '64',
    '--gpu-memory-utilization',
    '0.9',
    '--quantization',
    'fp8',
    '--kv-cache-dtype',
    'fp8',
  ]);
});

test('vLLM engine with a fake vLLM child: started with the mapped flags, relays tokens, stopped with SIGTERM', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'mp-vllm-'));
  const record = join(dir, 'record.txt');
  const fake = fileURLToPath(new URL('../fixtures/fake-vllm.ts', import.meta.url));
  process.env.FAKE_VLLM_RECORD = record;
  try {
    const config = testConfig({
      orchestratorEngine: 'vllm',
      orchestratorModels: [TINY],
      vllmCommand: [process.execPath, fake],
      maxNumSeqs: 8,
      maxModelLen: 1024,
      tensorParallelSize: 2,
    });
    const o = await startOrchestrator({ options: orchestratorOptions(config), log: quietLog });
    const started = JSON.parse((await readFile(record, 'utf8')).split('\n')[0] ?? '{}').args as string[];
    assert.equal(started[0], join(MODELS_DIR, TINY, 'llama-2-tiny-random.gguf'));
    for (const [flag, value] of [
      ['--served-model-name', TINY],
      ['--max-model-len', '1024'],
      ['--max-num-seqs', '8'],
      ['--tensor-parallel-size', '2'],
      ['--gpu-memory-utilization', '0.97'],
    ]) {
      assert.equal(started[started.indexOf(flag!) + 1], value, flag);
    }
    const res = await fetch(`${o.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: body({ max_tokens: 5, top_k: 5, seed: 3, stop: ['x'] }),
    });
    const events = await readSse(res);
    const text = events
      .slice(0, -1)
      .map((e) => JSON.parse(e.data))
      .map((c: any) => c.choices[0]?.delta?.content ?? '')
      .join('');
    assert.equal(text, 'fake tokens from vllm é🦙');
    const lastContent = JSON.parse(events.at(-3)?.data ?? '{}').choices[0];
    assert.equal(lastContent.finish_reason, 'stop', 'the last content chunk carries finish_reason');
    assert.ok(lastContent.delta.content, "and the final step's text");
    assert.equal(JSON.parse(events.at(-2)?.data ?? '{}').usage.completion_tokens, 5);
    const sent = JSON.parse((await readFile(record, 'utf8')).split('\n')[1] ?? '{}');
    assert.equal(sent.top_k, 5);
    assert.equal(sent.seed, 3);
    assert.deepEqual(sent.stop, ['x']);
    await o.close();
    assert.match(await readFile(record, 'utf8'), /SIGTERM\n$/);

    // The usage chunk ends the answer (the response ends with it): text a server sends after
    // it is not written after the end.
    process.env.FAKE_VLLM_TRAILING = '1';
    // Unpaced, so that text after the end would be written at once, not dropped with a timer.
    const late = await startOrchestrator({
      options: orchestratorOptions({ ...config, orchestratorStreamIntervalMs: 0 }),
      log: quietLog,
    });
    try {
      const tail = await readSse(
        await fetch(`${late.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: body({ max_tokens: 5 }),
        }),
      );
      assert.equal(tail.at(-1)?.data, '[DONE]');
      assert.equal(JSON.parse(tail.at(-2)?.data ?? '{}').usage.completion_tokens, 5);
      assert.ok(!tail.some((e) => e.data.includes('trailing')), 'nothing after the usage chunk');
    } finally {
      await late.close();
      delete process.env.FAKE_VLLM_TRAILING;
    }

    process.env.FAKE_VLLM_FAIL = '1';
    await assert.rejects(
      startOrchestrator({ options: orchestratorOptions(config), log: quietLog }),
      /vLLM exited during start-up: ValueError: fake vLLM refuses to start/,
    );
  } finally {
    delete process.env.FAKE_VLLM_FAIL;
    delete process.env.FAKE_VLLM_RECORD;
    await rm(dir, { recursive: true, force: true });
  }
});

test('llama.cpp engine: text a busy consumer has not taken arrives merged, nothing lost; the last token rides on the end event', async () => {
  const engine = createEngine(orchestratorOptions(testConfig({ orchestratorModels: [TINY] })).engine, quietLog);
  await engine.start();
  try {
    const params = { messages: [{ role: 'user' as const, content: 'Hello' }], maxTokens: 30, temperature: 0, n: 1 };
    const run = async (busy: boolean): Promise<GenerateEvent[]> => {
      const events: GenerateEvent[] = [];
      const before = engine.tokensComputed;
      for await (const ev of engine.generate(TINY, params, new AbortController().signal)) {
        events.push(ev);
        // A busy consumer: after the first event, take nothing until every token is computed.
        while (busy && events.length === 1 && engine.tokensComputed < before + 30)
          await new Promise((r) => setImmediate(r));
      }
      return events;
    };
    const text = (evs: GenerateEvent[]): string => evs.map((e) => ('text' in e ? e.text : '')).join('');
    const quick = await run(false);
    const busy = await run(true);
    const [end, usage] = quick.slice(-2);
    assert.ok(end?.type === 'end' && end.finishReason === 'length' && end.index === 0);
    assert.ok(end.text.length > 0, "max_tokens reached: the last token's text is on the end event");
    assert.ok(usage?.type === 'usage' && usage.usage.completion_tokens === 30, 'then the usage, last');
    assert.ok(quick.slice(0, -2).every((e) => e.type === 'text'));
    assert.equal(text(busy), text(quick), 'greedy decoding: the same text either way');
    assert.ok(busy.length <= 4 && busy.length < quick.length, `merged: ${busy.length} events against ${quick.length}`);
    assert.deepEqual(
      busy.slice(-2).map((e) => e.type),
      ['end', 'usage'],
    );
  } finally {
    await engine.close();
  }
});

test('stream pacing: at most one write per MEDIAPLANE_ORCHESTRATOR_STREAM_INTERVAL_MS, the first token at once, nothing lost', async () => {
  const intervalMs = 1000;
  const start = (ms: number) =>
    startOrchestrator({
      options: orchestratorOptions(testConfig({ orchestratorModels: [TINY], orchestratorStreamIntervalMs: ms })),
      log: quietLog,
    });
  const [paced, unpaced] = await Promise.all([start(intervalMs), start(0)]);
  try {
    const ask = async (url: string | undefined): Promise<any[]> => {
      const events = await readSse(
        await fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: body({ max_tokens: 40, temperature: 0 }),
        }),
      );
      return events.slice(0, -2).map((e) => JSON.parse(e.data));
    };
    const text = (chunks: any[]): string => chunks.map((c) => c.choices[0].delta.content).join('');
    const started = performance.now();
    const chunks = await ask(paced.url);
    const elapsed = performance.now() - started;
    assert.equal(chunks[0].choices[0].delta.role, 'assistant');
    assert.equal(text(chunks), text(await ask(unpaced.url)), 'greedy decoding: the same text, merged or not');
    // One write at once, then one per interval at most; the last content chunk rides with the usage chunk.
    assert.ok(
      chunks.length <= 2 + Math.floor(elapsed / intervalMs),
      `${chunks.length} chunks in ${Math.round(elapsed)} ms`,
    );
    assert.equal(chunks.at(-1).choices[0].finish_reason, 'length');
  } finally {
    await Promise.all([paced.close(), unpaced.close()]);
  }
});

test('chunkEncoder gives byte for byte the SSE form of chunk()', () => {
  const meta = { id: 'chatcmpl-x"1', created: 1700000000, model: 'a/b' };
  const encode = chunkEncoder(meta);
  const logprobs = [{ token: 'Hi', logprob: -0.5, bytes: [72, 105], top_logprobs: [] }];
  for (const choice of [
    { index: 0, delta: { role: 'assistant' as const, content: 'Hi "there"\n' }, finish: null },
    { index: 2, delta: { content: '🦙' }, finish: 'length' as const },
    { index: 0, delta: { content: '' }, finish: 'stop' as const },
    { index: 1, delta: { content: 'Hi' }, logprobs, finish: null },
    {
      index: 0,
      delta: {
        tool_calls: [{ index: 0, id: 'call_1', type: 'function' as const, function: { name: 'f', arguments: '{' } }],
      },
      finish: null,
    },
    { index: 0, delta: {}, finish: 'tool_calls' as const },
  ]) {
    assert.equal(encode(choice), formatSse({ data: chunk({ ...meta, choice }) }));
  }
  // The plain stream's bytes (the hot path): no logprobs key unless asked for.
  assert.equal(
    encode({ index: 0, delta: { content: 'a' }, finish: null }),
    'data: {"id":"chatcmpl-x\\"1","object":"chat.completion.chunk","created":1700000000,"model":"a/b","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}\n\n',
  );
});
