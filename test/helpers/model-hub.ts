// A model hub on port 0 that answers as huggingface.co does: GET /api/models/<id>?blobs=true
// lists the files (`siblings[].rfilename`, `size`, `lfs.sha256`), GET /<id>/resolve/main/<file>
// is a 302 to a content path of the same server with the sha256 in X-Linked-Etag, and the
// content path serves the bytes with Range. It can cut the first download after a share of the
// bytes (destroying the socket) and serve wrong bytes for a resumed range, and it keeps every
// content request's Range header.

import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface HubModel {
  id: string;
  /** File name on the hub -> path of its bytes here. */
  files: Record<string, string>;
}

export interface FakeHub {
  url: string;
  /** The Range header of each content request (undefined: none), in order. */
  ranges: Array<string | undefined>;
  /** Cut the next content request that has no Range after this share of the file (0..1). */
  cutFirstAt?: number | undefined;
  /** Serve wrong bytes for every ranged content request. */
  corruptRanges: boolean;
  /** The bytes the cut request sent before the socket was destroyed. */
  cutAfter?: number;
  /** Called as each content request arrives, with its Range header. */
  onContent?: ((range: string | undefined) => void) | undefined;
  sha256(file: string): string;
  close(): Promise<void>;
}

export async function startFakeHub(models: HubModel[]): Promise<FakeHub> {
  const blobs = new Map<string, Buffer>();
  const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
  for (const m of models)
    for (const [name, path] of Object.entries(m.files)) blobs.set(`${m.id}/${name}`, readFileSync(path));
  const byHash = new Map([...blobs.values()].map((b) => [sha(b), b]));
  const hub: FakeHub = {
    url: '',
    ranges: [],
    corruptRanges: false,
    sha256: (file) => sha(blobs.get(file) ?? Buffer.alloc(0)),
    close: () => new Promise((r) => server.close(() => r())),
  };
  const listing = (m: HubModel) => ({
    id: m.id,
    siblings: [
      { rfilename: '.gitattributes', size: 1519 },
      { rfilename: 'README.md', size: 100 },
      ...Object.keys(m.files).map((name) => {
        const b = blobs.get(`${m.id}/${name}`) ?? Buffer.alloc(0);
        return { rfilename: name, size: b.length, lfs: { sha256: sha(b), size: b.length, pointerSize: 135 } };
      }),
    ],
  });
  const content = (req: IncomingMessage, res: ServerResponse, bytes: Buffer) => {
    const range = req.headers.range;
    hub.ranges.push(range);
    hub.onContent?.(range);
    const m = /^bytes=(\d+)-$/.exec(range ?? '');
    if (m) {
      const from = Number(m[1]);
      if (from >= bytes.length) return res.writeHead(416, { 'content-range': `bytes */${bytes.length}` }).end();
      const rest = hub.corruptRanges ? Buffer.alloc(bytes.length - from, 0x5a) : bytes.subarray(from);
      res.writeHead(206, {
        'content-range': `bytes ${from}-${bytes.length - 1}/${bytes.length}`,
        'content-length': rest.length,
        'accept-ranges': 'bytes',
      });
      return res.end(rest);
    }
    res.writeHead(200, { 'content-length': bytes.length, 'accept-ranges': 'bytes' });
    if (hub.cutFirstAt === undefined) return res.end(bytes);
    const cut = Math.floor(bytes.length * hub.cutFirstAt);
    hub.cutFirstAt = undefined;
    hub.cutAfter = cut;
    // Once the kernel has the bytes, the socket goes: the client reads them, then a cut stream.
    res.write(bytes.subarray(0, cut), () => req.socket.destroy());
  };
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://hub');
    const api = /^\/api\/models\/([^/]+\/[^/]+)$/.exec(url.pathname);
    const resolve = /^\/([^/]+\/[^/]+)\/resolve\/main\/([^/]+)$/.exec(url.pathname);
    const cdn = /^\/cdn\/([0-9a-f]{64})$/.exec(url.pathname);
    const model = models.find((m) => m.id === (api?.[1] ?? resolve?.[1]));
    if (api && model)
      return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(listing(model)));
    const blob = resolve && blobs.get(`${resolve[1]}/${decodeURIComponent(resolve[2] ?? '')}`);
    if (resolve && blob) {
      // As the real hub: the checksum is on the redirect, which a fetch that follows it never sees.
      return res
        .writeHead(302, {
          location: `/cdn/${sha(blob)}`,
          'x-linked-etag': `"${sha(blob)}"`,
          'x-linked-size': blob.length,
        })
        .end();
    }
    const bytes = cdn && byHash.get(cdn[1] ?? '');
    if (bytes) return content(req, res, bytes);
    res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"Repository not found"}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  hub.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return hub;
}
