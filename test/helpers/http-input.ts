import { createReadStream, statSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type Route = (req: http.IncomingMessage, res: http.ServerResponse) => void;

export interface TestHttp {
  url(path: string): string;
  /** Requests seen, by path, to check which hops and gateways were tried. */
  hits: string[];
  close(): Promise<void>;
}

/** Serves a file with its length, as a web server would. */
export function serveFile(file: string, contentType = 'video/mp4'): Route {
  return (_req, res) => {
    res.writeHead(200, { 'content-type': contentType, 'content-length': statSync(file).size });
    createReadStream(file, { highWaterMark: 1 << 20 }).pipe(res);
  };
}

export function status(code: number): Route {
  return (_req, res) => {
    res.writeHead(code);
    res.end(`status ${code}`);
  };
}

export function redirect(to: string, code = 302): Route {
  return (_req, res) => {
    res.writeHead(code, { location: to });
    res.end();
  };
}

/** Sends some bytes, then nothing: a stalled upstream. */
export function stall(): Route {
  return (_req, res) => {
    res.writeHead(200, { 'content-type': 'video/mp4' });
    res.write(Buffer.alloc(1024));
  };
}

/** A real HTTP server on 127.0.0.1:0; unknown paths answer 404. */
export async function startHttp(routes: Record<string, Route>): Promise<TestHttp> {
  const hits: string[] = [];
  const server = http.createServer((req, res) => {
    const p = new URL(req.url ?? '/', 'http://x').pathname;
    hits.push(p);
    (routes[p] ?? status(404))(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    url: (p) => `http://127.0.0.1:${port}${p}`,
    hits,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
