import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline } from 'node:stream/promises';
import type { ByteRange } from './builtin/types.ts';
import type { RangeReader } from './ranges.ts';

// Issue #30: ffmpeg and ffprobe read a chunk's part of the input over HTTP from this proxy on
// 127.0.0.1, which answers their Range requests through a RangeReader (our own guarded
// clients, storage/ranges.ts): one place for every source kind, the guard kept, and no
// credential ever on ffmpeg's command line. The path holds a random token, so another local
// process cannot guess it.

export interface RangeProxy {
  /** What ffmpeg opens: `http://127.0.0.1:PORT/TOKEN/source`. */
  readonly url: string;
  /** The first upstream failure, if any: the real reason when ffmpeg reports an I/O error. */
  readonly error: unknown;
  close(): Promise<void>;
}

/**
 * `bytes=a-b`, `bytes=a-` or `bytes=-n` against `size`; undefined for no header or a form it
 * does not take (then the whole object), null for a range outside the object (416).
 */
export function parseRange(header: string | undefined, size: number): ByteRange | undefined | null {
  const m = /^bytes=(\d*)-(\d*)$/.exec(header?.trim() ?? '');
  if (!m) return undefined;
  const [, a = '', b = ''] = m;
  if (a === '' && b === '') return undefined;
  if (a === '') {
    const n = Math.min(Number(b), size);
    return n > 0 ? { start: size - n, end: size - 1 } : null;
  }
  const start = Number(a);
  const end = b === '' ? size - 1 : Math.min(Number(b), size - 1);
  return start < size && start <= end ? { start, end } : null;
}

export async function startRangeProxy(reader: RangeReader): Promise<RangeProxy> {
  const token = randomBytes(12).toString('hex');
  const state: { error: unknown } = { error: undefined };
  const server = http.createServer((req, res) => {
    void answer(reader, { req, res, token, state });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/${token}/source`,
    get error() {
      return state.error;
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      reader.close();
    },
  };
}

async function answer(
  reader: RangeReader,
  o: { req: http.IncomingMessage; res: http.ServerResponse; token: string; state: { error: unknown } },
): Promise<void> {
  const { req, res } = o;
  if (req.url !== `/${o.token}/source` || (req.method !== 'GET' && req.method !== 'HEAD')) {
    res.writeHead(404).end();
    return;
  }
  const size = reader.size;
  const range = parseRange(req.headers.range, size);
  if (range === null || size === 0) {
    res.writeHead(416, { 'content-range': `bytes */${size}` }).end();
    return;
  }
  const part = range ?? { start: 0, end: size - 1 };
  const headers = {
    'accept-ranges': 'bytes',
    'content-type': 'application/octet-stream',
    'content-length': String(part.end - part.start + 1),
    ...(range ? { 'content-range': `bytes ${part.start}-${part.end}/${size}` } : {}),
  };
  if (req.method === 'HEAD') {
    res.writeHead(range ? 206 : 200, headers).end();
    return;
  }
  // ffmpeg drops a connection when it seeks: the upstream read stops with it.
  const gone = new AbortController();
  res.on('close', () => gone.abort());
  try {
    const body = await reader.read(part, gone.signal);
    res.writeHead(range ? 206 : 200, headers);
    await pipeline(body, res, { signal: gone.signal });
  } catch (err) {
    if (!gone.signal.aborted) o.state.error ??= err;
    if (!res.headersSent) res.writeHead(502).end();
    else res.destroy();
  }
}
