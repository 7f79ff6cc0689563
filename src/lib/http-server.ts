import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { BadRequestError, HeadersTooLargeError, type MediaplaneError, RequestTimeoutError } from './errors.ts';

// Socket limits of every HTTP server the service starts (the API's, a standalone
// orchestrator's). Fastify turns Node's request timeout off by default, so a client sending
// its body a byte at a time held a socket for as long as it liked (issue #15: 300 such
// connections were all still open after 90 s).

export interface ServerTimeouts {
  /** Headers and body must all have arrived by then (408 and the socket closed otherwise). */
  requestTimeoutMs: number;
  /** An idle keep-alive socket is closed after this long. */
  keepAliveTimeoutMs: number;
}

/**
 * Fastify's server options for these limits. Node enforces the request and header timeouts
 * only on a periodic sweep (every 30 s by default), which would let a slow request live up to
 * 30 s past its limit: the sweep runs at a tenth of the timeout (at most every second).
 * The request timeout stops at the end of the request: a long answer (an SSE stream of
 * generated text) is not cut, since Node stops tracking the request once its body is in.
 */
export function serverTimeoutOptions(t: ServerTimeouts) {
  return {
    requestTimeout: t.requestTimeoutMs,
    keepAliveTimeout: t.keepAliveTimeoutMs,
    http: {
      headersTimeout: t.requestTimeoutMs,
      connectionsCheckingInterval: Math.max(10, Math.min(1000, Math.floor(t.requestTimeoutMs / 10))),
    },
  };
}

/** What Node's HTTP parser refused, before any route saw the request, as one of the error family. */
function parserError(err: Error & { code?: string }, requestTimeoutMs: number): MediaplaneError {
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT')
    return new RequestTimeoutError(`the request did not arrive in full within ${requestTimeoutMs} ms`);
  if (err.code === 'HPE_HEADER_OVERFLOW') return new HeadersTooLargeError('the request headers are too large');
  return new BadRequestError('the request is not valid HTTP (does Content-Length match the body?)');
}

/**
 * Fastify's clientErrorHandler: answers what Node's HTTP parser refuses before any route sees
 * it (a body that outlives the request timeout: 408; headers too large: 431; bytes that are
 * not HTTP, such as the rest of a body longer than its Content-Length: 400) in the server's
 * own error shape, where Fastify's default has a shape of its own (issue #15). `answer` maps
 * the error to a wire answer (lib/wire-errors.ts); it gets the socket, whose request in
 * flight can say which API it was for.
 */
export function clientErrorHandler(opts: {
  requestTimeoutMs: number;
  answer: (e: MediaplaneError, socket: Socket) => { status: number; body: object };
}) {
  return (err: Error & { code?: string }, socket: Socket): void => {
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    const { status, body: answer } = opts.answer(parserError(err, opts.requestTimeoutMs), socket);
    const body = JSON.stringify(answer);
    if (socket.writable)
      socket.write(
        `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      );
    socket.destroy();
  };
}
