import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { NotFoundError } from '../lib/errors.ts';
import { routineRouteLevel } from '../lib/log.ts';
import type { PublicBase } from './public-base.ts';

// The browser console (issue #29) at `/`: console/dist as scripts/build-console.ts writes it.
// index.html is read on every request and never cached, so a rebuild shows on reload; the
// files under /assets/ have content hashes in their names and are cached for a year. The
// console routes hash-based (#/assets/ID), so `/` is its only page. These routes have no
// schema and so stay out of /api/openapi.json on purpose: they are no API. Nothing here
// needs a key: the page asks for one and sends it to /api.

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.woff2': 'font/woff2',
  '.png': 'image/png',
};

/** Where the built console is: console/dist beside src/. */
export function defaultConsoleDir(): string {
  return path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../console/dist');
}

const NOT_BUILT =
  '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Mediaplane</title></head><body><main><h1>The console is not built</h1><p>Run <code>npm run build:console</code> (or start the service with <code>make start</code>, which builds it) and reload. The API is at <a href="/api/openapi.json">/api/openapi.json</a>.</p></main></body></html>';

const HEADERS = { 'x-content-type-options': 'nosniff', 'referrer-policy': 'same-origin' };

/**
 * The page's Content-Security-Policy (CSP Level 3): the console's own scripts and styles only
 * (the build writes no inline script or style; Preact sets style properties through the CSSOM,
 * which CSP allows), API calls and uploads to this origin and to `base` (the origin the API's
 * absolute URLs start with, MEDIAPLANE_PUBLIC_URL or the listening address), media and images
 * from there too, and hls.js's two `blob:` needs: its transmuxing worker and the MediaSource
 * the <video> plays. No plugins, no <base>, no framing (X-Frame-Options says the same).
 */
export function consolePolicy(base: string | undefined): string {
  const api = base ? ` ${base}` : '';
  return [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    `img-src 'self'${api}`,
    `media-src 'self'${api} blob:`,
    `connect-src 'self'${api}`,
    "worker-src 'self' blob:",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/** The origin of the public base, when it has one. */
function originOf(base: PublicBase | undefined): string | undefined {
  try {
    const origin = base ? new URL(base()).origin : 'null';
    return origin === 'null' ? undefined : origin;
  } catch {
    return undefined;
  }
}

export async function consoleRoutes(
  app: FastifyInstance,
  opts: { dir?: string; publicBase?: PublicBase } = {},
): Promise<void> {
  const dir = opts.dir ?? defaultConsoleDir();
  // A page load is several files: their request lines only at debug, like the probes'; the
  // console's calls to /api are logged as every API request is.
  const routine = { logLevel: routineRouteLevel(app.log.level) };
  app.get('/', routine, async (_req, reply) => {
    // Read per request: the listening address is known only once the server listens.
    const page = { ...HEADERS, 'content-security-policy': consolePolicy(originOf(opts.publicBase)) };
    let html: string;
    try {
      html = await readFile(path.join(dir, 'index.html'), 'utf8');
    } catch {
      return reply.code(503).headers(page).type('text/html; charset=utf-8').send(NOT_BUILT);
    }
    return reply
      .headers({ ...page, 'cache-control': 'no-cache', 'x-frame-options': 'DENY' })
      .type('text/html; charset=utf-8')
      .send(html);
  });
  const favicon = (reply: FastifyReply) =>
    sendFile(reply, { file: path.join(dir, 'favicon.svg'), type: TYPES['.svg'] ?? '', cache: 'public, max-age=86400' });
  app.get('/favicon.svg', routine, async (_req, reply) => favicon(reply));
  app.get('/favicon.ico', routine, async (_req, reply) => favicon(reply));
  app.get<{ Params: { file: string } }>('/assets/:file', routine, async (req, reply) => {
    const name = req.params.file;
    const type = TYPES[path.extname(name)];
    // Only the flat names the build writes: no dot-files, no separators, a known type.
    if (!/^[\w-][\w.-]*$/.test(name) || !type) throw new NotFoundError(`no such file: /assets/${name}`);
    return sendFile(reply, {
      file: path.join(dir, 'assets', name),
      type,
      cache: 'public, max-age=31536000, immutable',
    });
  });
}

async function sendFile(reply: FastifyReply, o: { file: string; type: string; cache: string }): Promise<FastifyReply> {
  let size: number;
  try {
    size = (await stat(o.file)).size;
  } catch {
    throw new NotFoundError(`no such file: ${path.basename(o.file)}`);
  }
  return reply
    .headers({ ...HEADERS, 'content-type': o.type, 'content-length': size, 'cache-control': o.cache })
    .send(createReadStream(o.file));
}
