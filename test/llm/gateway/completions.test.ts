// POST /v1/completions, OpenAI's legacy text completion (issue #17), with the real openai SDK
// against the gateway and a llama.cpp orchestrator: plain, streamed, echo, a list of prompts,
// and the fields refused by name.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type OpenAI from 'openai';
import { type LocalLlm, readSse, startLocalLlm, TINY } from '../../helpers/llm.ts';

const PROMPT = 'Once upon a time';

let llm: LocalLlm;
let key: string;
let client: OpenAI;

before(async () => {
  llm = await startLocalLlm({ models: [TINY] });
  ({ key, client } = llm);
});
after(() => llm.close());

const post = (body: unknown): Promise<Response> =>
  fetch(`${llm.url}/v1/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

test("the openai SDK's completions.create: a text_completion continuing the prompt", async () => {
  const res = await client.completions.create({ model: TINY, prompt: PROMPT, max_tokens: 5, seed: 7 });
  assert.equal(res.object, 'text_completion');
  assert.match(res.id, /^cmpl-/);
  assert.equal(res.model, TINY);
  assert.equal(res.choices.length, 1);
  assert.equal(res.choices[0]?.index, 0);
  assert.equal(typeof res.choices[0]?.text, 'string');
  assert.ok(res.choices[0]?.text.length, 'some text');
  const completion = res.usage?.completion_tokens ?? 0;
  if (res.choices[0]?.finish_reason === 'length') assert.equal(completion, 5);
  else assert.ok(completion >= 1 && completion <= 5);
  // The prompt is tokenized as is, no chat template: its beginning-of-text token and its words.
  assert.ok((res.usage?.prompt_tokens ?? 0) > 1);
  assert.ok((res.usage?.prompt_tokens ?? 0) < 10, `prompt_tokens ${res.usage?.prompt_tokens}`);
});

test('streamed: text_completion chunks whose text joins to the unstreamed answer of the same seed', async () => {
  const whole = await client.completions.create({ model: TINY, prompt: PROMPT, max_tokens: 8, seed: 11 });
  const stream = await client.completions.create({
    model: TINY,
    prompt: PROMPT,
    max_tokens: 8,
    seed: 11,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let finish: string | null = null;
  let usage: unknown;
  for await (const c of stream) {
    assert.equal(c.object, 'text_completion');
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) {
      text += ch.text;
      finish = ch.finish_reason ?? finish;
    }
  }
  assert.equal(text, whole.choices[0]?.text);
  assert.equal(finish, whole.choices[0]?.finish_reason);
  assert.deepEqual(usage, whole.usage);

  // Without include_usage, every chunk has a choice (no usage chunk to trip over).
  const raw = await readSse(await post({ model: TINY, prompt: PROMPT, max_tokens: 3, stream: true }));
  assert.equal(raw.at(-1)?.data, '[DONE]');
  for (const ev of raw.slice(0, -1)) assert.equal(JSON.parse(ev.data).choices.length, 1);
});

test('echo puts the prompt before the completion', async () => {
  const plain = await client.completions.create({ model: TINY, prompt: PROMPT, max_tokens: 4, seed: 3 });
  const echoed = await client.completions.create({ model: TINY, prompt: PROMPT, max_tokens: 4, seed: 3, echo: true });
  assert.equal(echoed.choices[0]?.text, PROMPT + (plain.choices[0]?.text ?? ''));
});

test('a list of prompts: one completion each, n choices per prompt numbered prompt by prompt', async () => {
  const res = await client.completions.create({ model: TINY, prompt: ['One day', 'The cat'], max_tokens: 3, n: 2 });
  assert.deepEqual(
    res.choices.map((c) => c.index),
    [0, 1, 2, 3],
  );
  for (const c of res.choices) assert.equal(typeof c.text, 'string');
  const completion = res.usage?.completion_tokens ?? 0;
  assert.ok(completion >= 4 && completion <= 12, `completion_tokens ${completion}, summed over the prompts`);
  assert.equal(res.usage?.total_tokens, (res.usage?.prompt_tokens ?? 0) + (res.usage?.completion_tokens ?? 0));
});

test('max_tokens holds when the last token ends inside a UTF-8 character', async () => {
  // Token 231 is the byte 0xE4 in the Llama-2 vocabulary: the first of three bytes of a
  // character. node-llama-cpp samples one token past max_tokens to complete such a character.
  for (const max_tokens of [1, 3]) {
    const res = await client.completions.create({
      model: TINY,
      prompt: PROMPT,
      max_tokens,
      logit_bias: { '231': 100 },
      logprobs: 1,
    });
    assert.equal(res.choices[0]?.finish_reason, 'length');
    assert.equal(res.usage?.completion_tokens, max_tokens);
    assert.ok((res.choices[0]?.logprobs?.tokens?.length ?? 0) <= max_tokens);
  }
});

test('suffix, best_of above 1 and token-array prompts are refused naming the field; off values are fine', async () => {
  await assert.rejects(
    client.completions.create({ model: TINY, prompt: PROMPT, max_tokens: 2, suffix: 'The end.' }),
    (err: any) => err.status === 400 && err.param === 'suffix' && /not supported/.test(err.message),
  );
  await assert.rejects(
    client.completions.create({ model: TINY, prompt: PROMPT, max_tokens: 2, best_of: 3 }),
    (err: any) => err.status === 400 && err.param === 'best_of',
  );
  for (const prompt of [[1, 2, 3], [[1, 2]]]) {
    const res = await post({ model: TINY, prompt, max_tokens: 2 });
    assert.equal(res.status, 400);
    const err = ((await res.json()) as any).error;
    assert.match(err.param, /^prompt/);
    assert.match(err.message, /token arrays are not supported/);
  }
  const ok = await post({
    model: TINY,
    prompt: PROMPT,
    max_tokens: 2,
    best_of: 1,
    suffix: null,
    echo: false,
    store: 1,
  });
  assert.equal(ok.status, 200);
  assert.equal(ok.headers.get('x-mediaplane-ignored-fields'), 'store');
});

test('what streaming cannot give is refused naming the field', async () => {
  const many = await post({ model: TINY, prompt: ['a', 'b'], max_tokens: 2, stream: true });
  assert.equal(many.status, 400);
  assert.equal(((await many.json()) as any).error.param, 'prompt');
  const echo = await post({ model: TINY, prompt: 'a', max_tokens: 2, stream: true, echo: true });
  assert.equal(echo.status, 400);
  assert.equal(((await echo.json()) as any).error.param, 'echo');
  const scored = await post({ model: TINY, prompt: 'a', max_tokens: 2, echo: true, logprobs: 1 });
  assert.equal(scored.status, 400);
  assert.equal(((await scored.json()) as any).error.param, 'echo');
});

test('logprobs k: each token with its log probability and k alternatives, in the legacy form', async () => {
  // Seeded: a last token left inside a UTF-8 character is counted but never released.
  const res = await client.completions.create({ model: TINY, prompt: PROMPT, max_tokens: 4, logprobs: 2, seed: 5 });
  const lp = res.choices[0]?.logprobs;
  assert.ok(lp, 'logprobs present');
  assert.equal(lp.tokens?.length, res.usage?.completion_tokens);
  assert.equal(lp.token_logprobs?.length, lp.tokens?.length);
  for (const [i, alternatives] of (lp.top_logprobs ?? []).entries()) {
    assert.equal(Object.keys(alternatives).length, 2);
    assert.ok((lp.token_logprobs?.[i] ?? 1) <= 0);
    const p = Object.values(alternatives).reduce((s, l) => s + Math.exp(l), 0);
    assert.ok(p <= 1 + 1e-6, `probabilities sum to ${p}`);
  }
  assert.equal(lp.tokens?.join(''), res.choices[0]?.text);
  const over = await post({ model: TINY, prompt: PROMPT, max_tokens: 2, logprobs: 6 });
  assert.equal(over.status, 400);
  assert.equal(((await over.json()) as any).error.param, 'logprobs');
});
