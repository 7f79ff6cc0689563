import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';

// URLs in responses are absolute (spec/API.md section C): under MEDIAPLANE_PUBLIC_URL when it
// is set, else the address the service listens on; never built from the request's Host
// header, which a client chooses.

/** The base URL (no trailing slash) absolute links in responses start with. */
export type PublicBase = () => string;

/** `publicUrl` when set; else the address `app` listens on, read when a link is built (after listen). */
export function publicBase(app: FastifyInstance, publicUrl: string | undefined): PublicBase {
  if (publicUrl) return publicBaseOf(publicUrl);
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

/**
 * The base for a process that may not listen at all (a worker delivering webhooks):
 * `publicUrl`, else the address the settings say the API listens on.
 */
export function configuredBase(o: { publicUrl?: string | undefined; host: string; port: number }): PublicBase {
  if (o.publicUrl) return publicBaseOf(o.publicUrl);
  const wildcard = o.host === '0.0.0.0' || o.host === '::';
  const host = wildcard ? '127.0.0.1' : o.host.includes(':') ? `[${o.host}]` : o.host;
  return () => `http://${host}:${o.port}`;
}

function publicBaseOf(publicUrl: string): PublicBase {
  const base = publicUrl.replace(/\/+$/, '');
  return () => base;
}

/** The absolute URL of a built-in store key (api/media-routes.ts serves `/media/<key>`). */
export const mediaUrl = (base: PublicBase, key: string): string =>
  `${base()}/media/${key.split('/').map(encodeURIComponent).join('/')}`;
