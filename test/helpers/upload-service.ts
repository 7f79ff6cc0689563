import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createContext, cleanupContext } from '@storacha/upload-api/test/context';
import { delegate, Message } from '@ucanto/core';
import type { Principal, Signer } from '@ucanto/interface';
import { CAR } from '@ucanto/transport';
import { parse as parseLink } from 'multiformats/link';

// A real Storacha upload service on 127.0.0.1 port 0 (issue 5): @storacha/upload-api with its
// in-memory stores and test storage nodes, behind one HTTP server that answers UCAN
// invocations on POST / and receipts on GET /receipt/<task CID> (what the client polls).

/** http with every server bound to 127.0.0.1 on a free port (the test storage nodes call listen(cb)). */
const loopbackHttp = {
  ...http,
  createServer: ((...args: Parameters<typeof http.createServer>) => {
    const server = http.createServer(...args);
    const listen = server.listen.bind(server);
    server.listen = ((...a: unknown[]) => {
      const cb = a.find((x) => typeof x === 'function') as (() => void) | undefined;
      return cb ? listen(0, '127.0.0.1', cb) : listen(0, '127.0.0.1');
    }) as typeof server.listen;
    return server;
  }) as typeof http.createServer,
};

type Context = Awaited<ReturnType<typeof createContext>>;

export interface UploadService {
  url: string;
  did: string;
  context: Context;
  /** Registers the space with the service, as `provider/add` after a plan would. */
  provision(space: `did:key:${string}`): Promise<void>;
  /** Root CIDs of the uploads registered in the space. */
  uploads(space: `did:key:${string}`): Promise<string[]>;
  /** Every request line the service saw (to check that no proof appears in a URL). */
  requests: string[];
  close(): Promise<void>;
}

const isSigner = (p: Principal): p is Signer => 'sign' in p;

/**
 * upload-api's stand-in indexing and claims services prove their `assert/*` right with a UCAN
 * that lives 30 s (ucanto's default), so an upload made later than that after start-up was
 * refused ("assert/index is not authorized") on a busy machine: the same proofs, for good.
 */
async function proveForGood(context: Context): Promise<void> {
  for (const { invocationConfig: c } of [context.indexingService, context.claimsService]) {
    if (!isSigner(c.audience)) throw new Error('upload-api: the stand-in service no longer signs its own proof');
    const capabilities: [{ can: 'assert/*'; with: typeof c.with }] = [{ can: 'assert/*', with: c.with }];
    c.proofs = [await delegate({ issuer: c.audience, audience: c.issuer, capabilities, expiration: Infinity })];
  }
}

export async function startUploadService(): Promise<UploadService> {
  const context = await createContext({ http: loopbackHttp as unknown as typeof http, requirePaymentPlan: false });
  await proveForGood(context);
  const channel = context.connection.channel;
  const requests: string[] = [];
  const server = http.createServer(async (req, res) => {
    requests.push(`${req.method} ${req.url}`);
    try {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const body = new Uint8Array(Buffer.concat(chunks));
      const receiptPath = req.url?.match(/^\/receipt\/([^/?]+)/);
      if (req.method === 'GET' && receiptPath?.[1]) {
        const found = await context.agentStore.receipts.get(parseLink(receiptPath[1]));
        if (found.error) return void res.writeHead(404).end();
        const message = await Message.build({ receipts: [found.ok] });
        const out = CAR.request.encode(message);
        res.writeHead(200, out.headers).end(Buffer.from(out.body));
        return;
      }
      if (req.method === 'POST') {
        const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
        const out = await channel.request({ headers, body });
        res.writeHead(out.status ?? 200, out.headers).end(Buffer.from(out.body));
        return;
      }
      res.writeHead(405).end();
    } catch (err) {
      res.writeHead(500).end(String(err));
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    did: context.id.did(),
    context,
    requests,
    async provision(space) {
      const r = await context.provisionsStorage.put({
        consumer: space,
        customer: 'did:mailto:example.com:alice',
        provider: context.id.did() as `did:web:${string}`,
        // The store only keeps the link; upload-api's own tests pass this identity CID too.
        cause: parseLink('bafkqaaa') as never,
      });
      if (r.error) throw r.error;
    },
    async uploads(space) {
      const r = await context.uploadTable.list(space);
      if (r.error) throw r.error;
      return r.ok.results.map((u) => u.root.toString());
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await cleanupContext(context);
    },
  };
}
