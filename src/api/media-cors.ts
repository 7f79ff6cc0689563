import type { FastifyReply } from 'fastify';
import { ForbiddenError } from '../lib/errors.ts';

// CORS of /media (spec/API.md section C). Players in any page may read the files (`*`), unless
// the asset's playbackPolicy names `allowedOrigins`, as Livepeer Studio's playback policies do:
// then a request with an `Origin` header is answered only for those origins (403 otherwise),
// its origin echoed in Access-Control-Allow-Origin with `Vary: Origin`. A request with no
// `Origin` is answered: a native player (Safari's <video>, VLC, ffmpeg) and a same-origin
// fetch send none, so the list keeps other sites' pages from reading the files, and is no
// substitute for a `jwt` policy. `*` in the list allows every origin, an empty list too.

export const CORS = {
  'access-control-allow-origin': '*',
  'access-control-expose-headers': 'Content-Length, Content-Range, Accept-Ranges, ETag',
};

/**
 * The preflight answer, for any origin: it carries no file, and the GET or HEAD that follows
 * is the request checked against the asset's origins.
 */
export const PREFLIGHT = {
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'GET, HEAD, OPTIONS',
  // Livepeer-Jwt: a player of a private asset may send its token as this header.
  'access-control-allow-headers': 'Range, If-None-Match, If-Modified-Since, If-Range, Livepeer-Jwt',
  'access-control-max-age': '86400',
};

/**
 * An origin as browsers serialize it (RFC 6454 section 6.2: `scheme://host[:port]`, lower case,
 * default port left out); what is no URL (`null`, `*`) is kept as written, lower-cased.
 */
function originOf(text: string): string {
  const trimmed = text.trim().toLowerCase();
  try {
    const origin = new URL(trimmed).origin;
    return origin === 'null' ? trimmed.replace(/\/+$/, '') : origin;
  } catch {
    return trimmed.replace(/\/+$/, '');
  }
}

/** The origins `playbackPolicy.allowedOrigins` restricts an asset to; undefined when it allows every origin. */
export function allowedOriginsOf(policy: Record<string, unknown> | null | undefined): readonly string[] | undefined {
  const list = policy?.allowedOrigins;
  if (!Array.isArray(list)) return undefined;
  const origins = list.filter((o): o is string => typeof o === 'string').map(originOf);
  return origins.length === 0 || origins.includes('*') ? undefined : origins;
}

/** Refuses (403) a request whose `Origin` is not one of `origins`; a request without one passes. */
export function checkOrigin(origins: readonly string[] | undefined, origin: string | undefined): void {
  if (origins === undefined || origin === undefined) return;
  if (!origins.includes(originOf(origin)))
    throw new ForbiddenError("playback refused: this asset's playbackPolicy does not allow the page's origin", {
      code: 'origin_not_allowed',
    });
}

/** The CORS headers of an answer of a restricted asset to a request `checkOrigin` passed. */
export function restrictCors(reply: FastifyReply, origin: string | undefined): void {
  reply.header('vary', 'Origin');
  if (origin === undefined) reply.removeHeader('access-control-allow-origin');
  else reply.header('access-control-allow-origin', origin);
}
