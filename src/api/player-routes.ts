import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { gzipSync } from 'node:zlib';
import type { FastifyInstance } from 'fastify';

// GET /player/hls.min.js: the service's own copy of hls.js (the npm package the console
// bundles), for the embed snippet the console gives out. A self-hosted service should not
// send its viewers' browsers to a public CDN for the player: this path is stable, its bytes
// are the installed hls.js version's (the ETag names it), and it needs no key, as a <script
// src> on another site's page sends none. Kept in memory once read: 620 KB, 190 KB gzipped.

export const playerScriptPath = '/player/hls.min.js';

const require = createRequire(import.meta.url);

interface Script {
  raw: Buffer;
  gzip: Buffer;
  etag: string;
}

let loaded: Promise<Script> | undefined;

function script(): Promise<Script> {
  loaded ??= (async () => {
    const raw = await readFile(require.resolve('hls.js/dist/hls.min.js'));
    const { version } = require('hls.js/package.json') as { version: string };
    return { raw, gzip: gzipSync(raw), etag: `"hls.js-${version}"` };
  })();
  return loaded;
}

const SCHEMA = {
  summary: "The service's copy of hls.js, for embedded players",
  description:
    'hls.js (the minified UMD build: a classic script that defines the global `Hls`) as installed with the service, for pages that embed a player of its assets: `<script src=".../player/hls.min.js">`. No API key; any site may load it (CORS and Cross-Origin-Resource-Policy allow it). Cached a day, ETag with If-None-Match answers 304; gzip when accepted.',
  security: [],
  response: {
    200: {
      description: 'JavaScript',
      content: { 'text/javascript': { schema: { type: 'string' } } },
    },
    304: { type: 'null', description: 'Not modified (If-None-Match)' },
  },
};

export async function playerRoutes(app: FastifyInstance): Promise<void> {
  app.get(playerScriptPath, { schema: SCHEMA }, async (req, reply) => {
    const s = await script();
    void reply.headers({
      'content-type': 'text/javascript; charset=utf-8',
      'cache-control': 'public, max-age=86400',
      etag: s.etag,
      vary: 'accept-encoding',
      'access-control-allow-origin': '*',
      'cross-origin-resource-policy': 'cross-origin',
    });
    if (req.headers['if-none-match'] === s.etag) return reply.code(304).send();
    const gzip = /\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''));
    if (gzip) void reply.header('content-encoding', 'gzip');
    return reply.send(gzip ? s.gzip : s.raw);
  });
}
