import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A webhook receiver on port 0: each delivery's request and whole body go through `read`,
 * what it returns is kept in `got`, and the delivery is answered 204.
 */
export async function startWebhookReceiver<T>(
  read: (req: IncomingMessage, body: string) => T,
): Promise<{ url: string; got: T[]; server: Server }> {
  const got: T[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      got.push(read(req, Buffer.concat(chunks).toString('utf8')));
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, got, server };
}

/** A receiver that keeps each delivery's JSON body. */
export function startJsonReceiver(): Promise<{ url: string; got: { event: string; payload: any }[]; server: Server }> {
  return startWebhookReceiver((_req, body) => JSON.parse(body) as { event: string; payload: any });
}
