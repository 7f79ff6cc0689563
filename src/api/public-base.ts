import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';

// URLs in responses are absolute (spec/API.md section C): under MEDIAPLANE_PUBLIC_URL when it
// is set, else the address the service listens on; never built from the request's Host
// header, which a client chooses.

/** The base URL (no trailing slash) absolute links in responses start with. */
export type PublicBase = () => string;

/** `publicUrl` when set; else the address `app` listens on, read when a link is built (after listen). */
export function publicBase(app: FastifyInstance, publicUrl: string | undefined): PublicBase {
  if (publicUrl) {
    const base = publicUrl.replace(/\/+$/, '');
    return () => base;
  }
  return () => {
    const addr = app.server.address() as AddressInfo | string | null;
    if (!addr || typeof addr === 'string') return '';
    // A wildcard address is no place to send a client to; this host's loopback is (set
    // MEDIAPLANE_PUBLIC_URL for clients on other machines).
    const wildcard = addr.address === '0.0.0.0' || addr.address === '::';
    const host = wildcard ? '127.0.0.1' : addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
    return `http://${host}:${addr.port}`;
  };
}

/** The absolute URL of a built-in store key (api/media-routes.ts serves `/media/<key>`). */
export const mediaUrl = (base: PublicBase, key: string): string =>
  `${base()}/media/${key.split('/').map(encodeURIComponent).join('/')}`;
