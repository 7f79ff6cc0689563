// The gateway's SSE relay against a scripted orchestrator: a plain HTTP server that answers
// /capabilities and sends a fixed byte script for a chat request, cut into network writes
// where we choose. A fake, because a real orchestrator cannot be made to split a character
// across writes, frame with CRLF or fail between two chunks of one write on demand.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { readSse, startGateway, TINY, type TestGateway } from '../../helpers/llm.ts';

let script: Buffer[] = [];
let server: Server;
let gw: TestGateway;
let key: string;

before(async () => {
  server = createServer((req, res) => {
    if (req.url === '/capabilities') {
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          engine: 'scripted',
          pricePerToken: 0,
          models: [{ id: TINY, warm: true, free: 8, total: 8, queued: 0 }],
        }),
      );
      return;
    }
    req.resume();
    req.on('end', () => void play(res, script));
  });
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const { port } = server.address() as AddressInfo;
  gw = await startGateway({ orchestrators: [`http://127.0.0.1:${port}`] });
  key = await gw.owner('carol');
});
after(async () => {
  await gw.close();
  server.closeAllConnections();
  server.close();
});

/** Writes each piece as its own network write (a pause between, so they are read apart). */
async function play(res: import('node:http').ServerResponse, pieces: Buffer[]): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  for (const p of pieces) {
    res.write(p);
    await sleep(15);
  }
  res.end();
}

const chunk = (content: string): string =>
  `data: ${JSON.stringify({ id: 'chatcmpl-x', object: 'chat.completion.chunk', created: 1, model: TINY, choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
const usage = `data: ${JSON.stringify({ id: 'chatcmpl-x', object: 'chat.completion.chunk', created: 1, model: TINY, choices: [], usage: { prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 } })}\n\n`;

/** Cuts `wire` into pieces at the given byte offsets. */
function cut(wire: string, at: number[]): Buffer[] {
  const b = Buffer.from(wire);
  return [0, ...at].map((from, i) => b.subarray(from, at[i] ?? b.length));
}

// The byte-exact tests ask for the usage chunk, so the whole wire comes back as it went.
const stream = async (): Promise<{ raw: string; events: Array<{ event?: string | undefined; data: string }> }> => {
  const res = await fetch(`${gw.url}/llm`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: TINY,
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 3,
      stream: true,
      stream_options: { include_usage: true },
    }),
  });
  assert.equal(res.status, 200);
  const raw = await res.clone().text();
  return { raw, events: await readSse(res) };
};

test('LF-framed token chunks reach the client byte for byte, whatever the network cuts', async () => {
  const wire = `${chunk('caf') + chunk('é 🦙') + chunk('!') + usage}data: [DONE]\n\n`;
  const llama = Buffer.from(wire).indexOf(Buffer.from('🦙'));
  // Cut inside the first event, inside the llama's four bytes, and between usage and [DONE].
  script = cut(wire, [10, llama + 2, Buffer.byteLength(wire) - 14]);
  const { raw, events } = await stream();
  assert.equal(raw, wire);
  assert.deepEqual(
    events.slice(0, 3).map((e) => JSON.parse(e.data).choices[0].delta.content),
    ['caf', 'é 🦙', '!'],
  );
});

test('CRLF framing is parsed and passed on as LF events, nothing lost', async () => {
  const wire = `${chunk('a') + chunk('b') + usage}data: [DONE]\n\n`.replaceAll('\n', '\r\n');
  script = cut(wire, [7, Buffer.from(wire).indexOf('\r\n\r\n') + 1]);
  const { raw, events } = await stream();
  assert.ok(!raw.includes('\r'), 'no CR passed on');
  assert.deepEqual(
    events.map((e) => e.data),
    [chunk('a'), chunk('b'), usage, 'data: [DONE]\n\n'].map((s) => s.slice(6, -2)),
  );
});

test('an error event in the same write as token chunks: the tokens, then event: error, and the stream ends', async () => {
  const error = `event: error\ndata: ${JSON.stringify({ error: { message: 'generation failed', type: 'server_error', code: 'upstream_failed' } })}\n\n`;
  script = [Buffer.from(chunk('one')), Buffer.from(chunk('two') + error + chunk('never'))];
  const { events } = await stream();
  assert.deepEqual(
    events.slice(0, 2).map((e) => JSON.parse(e.data).choices[0].delta.content),
    ['one', 'two'],
  );
  assert.equal(events[2]?.event, 'error');
  assert.match(events[2]?.data ?? '', /orchestrator failed during the answer/);
  assert.equal(events.length, 3, 'nothing after the error');
});

test('an answer cut off without [DONE] ends with event: error; the delivered tokens are charged', async () => {
  script = [Buffer.from(chunk('x') + chunk('y'))];
  const dave = await gw.owner('dave');
  const res = await fetch(`${gw.url}/llm`, {
    method: 'POST',
    headers: { authorization: `Bearer ${dave}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: TINY, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3, stream: true }),
  });
  const events = await readSse(res);
  assert.equal(events.at(-1)?.event, 'error');
  assert.match(events.at(-1)?.data ?? '', /closed the answer before its end/);
  // The free charge is written once the answer is out: wait for it.
  let entries: Array<{ completionTokens: number | null }> = [];
  for (let i = 0; i < 50 && entries.length === 0; i++) {
    await sleep(20);
    const r = await fetch(`${gw.url}/api/ledger`, { headers: { authorization: `Bearer ${dave}` } });
    entries = ((await r.json()) as { entries: typeof entries }).entries;
  }
  assert.equal(entries[0]?.completionTokens, 2, 'two token chunks delivered');
});
