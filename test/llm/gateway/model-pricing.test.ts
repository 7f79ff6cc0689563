// GET /v1/models says of each model whether it is `priced`: whether an orchestrator that may
// answer it (at or under the gateway's price ceiling) charges per token. A client such as the
// console shows a credit balance only where credit is needed; a free install shows none.

import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { startGateway, type TestGateway } from '../../helpers/llm.ts';

/** An orchestrator that only advertises: `pricePerToken` and the models it has. */
async function advertiser(pricePerToken: number, models: string[]): Promise<{ url: string; server: Server }> {
  const caps = {
    engine: 'fake',
    pricePerToken,
    models: models.map((id) => ({ id, warm: false, free: 1, total: 1, queued: 0 })),
  };
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(caps));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

let free: { url: string; server: Server };
let paid: { url: string; server: Server };
const gateways: TestGateway[] = [];
before(async () => {
  free = await advertiser(0, ['acme/free-only', 'acme/both']);
  paid = await advertiser(0.001, ['acme/both', 'acme/paid-only']);
});
after(async () => {
  for (const g of gateways) await g.close();
  free.server.close();
  paid.server.close();
});

async function pricedOf(config: Record<string, unknown> = {}): Promise<Record<string, boolean>> {
  const gw = await startGateway({ orchestrators: [free.url, paid.url], config });
  gateways.push(gw);
  const client = new OpenAI({ apiKey: await gw.owner('pricing'), baseURL: `${gw.url}/v1`, maxRetries: 0 });
  const list = await client.models.list();
  const one = (await client.models.retrieve('acme/both')) as unknown as { priced: boolean };
  const priced = Object.fromEntries(list.data.map((m) => [m.id, (m as unknown as { priced: boolean }).priced]));
  assert.equal(one.priced, priced['acme/both'], 'GET /v1/models/{id} says the same');
  return priced;
}

test('a model is priced when an orchestrator that may answer it charges', async () => {
  assert.deepEqual(await pricedOf(), { 'acme/both': true, 'acme/free-only': false, 'acme/paid-only': true });
});

test('an orchestrator above the price ceiling prices nothing: it never answers', async () => {
  assert.deepEqual(await pricedOf({ gatewayMaxPricePerToken: 0.0001 }), {
    'acme/both': false,
    'acme/free-only': false,
    'acme/paid-only': false,
  });
});
