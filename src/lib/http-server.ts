import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http';
import { createServer, type Socket } from 'node:net';
import { BadRequestError, HeadersTooLargeError, type MediaplaneError, RequestTimeoutError } from './errors.ts';

// Socket limits of every HTTP server the service starts (the API's, a standalone
// orchestrator's). Fastify turns Node's request timeout off by default, so a client sending
// its body a byte at a time held a socket for as long as it liked (issue #15: 300 such
// connections were all still open after 90 s). Node bounds the headers; the body's deadline
// is the app's (bodyDeadline), since Node's request timeout is server-wide and an upload's
// body legitimately takes longer than any one deadline (issue #27: a 1 GB PUT over a slow
// link was cut after 30 s).

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The body may take longer than the request timeout (an upload's file): no deadline for
     * it, but an idle timeout (ServerTimeouts.uploadIdleTimeoutMs) instead.
     */
    longBody?: boolean;
  }
}

export interface ServerTimeouts {
  /** Headers must have arrived by then, and the body by then after them (408 and the socket closed otherwise). */
  requestTimeoutMs: number;
  /** An idle keep-alive socket is closed after this long. */
  keepAliveTimeoutMs: number;
  /** A long body (a `longBody` route) that sends no byte for this long has its socket closed; requestTimeoutMs when absent. */
  uploadIdleTimeoutMs?: number | undefined;
}

/** A sweep at a tenth of `ms` (10 ms to 1 s): a limit is enforced at most that late. */
const sweepEvery = (ms: number) => Math.max(10, Math.min(1000, Math.floor(ms / 10)));

/**
 * Fastify's server options for these limits. Node's request timeout is off (0): it is
 * server-wide, and bodyDeadline enforces it per route instead. Node enforces the headers
 * timeout only on a periodic sweep (every 30 s by default), which would let slow headers live
 * up to 30 s past their limit: the sweep runs at a tenth of the timeout (at most every second).
 */
export function serverTimeoutOptions(t: ServerTimeouts) {
  return {
    requestTimeout: 0,
    keepAliveTimeout: t.keepAliveTimeoutMs,
    http: {
      headersTimeout: t.requestTimeoutMs,
      connectionsCheckingInterval: sweepEvery(t.requestTimeoutMs),
    },
  };
}

type Answer<R> = (e: MediaplaneError, on: R) => { status: number; body: object };

/**
 * Browsers must take every answer for the type it says (`X-Content-Type-Options: nosniff`):
 * /media serves users' files from the console's own origin, and a file sniffed as HTML or
 * script there would run with the console's rights. Set on each raw response before Fastify
 * sees the request (its own listener comes after this one), so every answer has it: those of
 * routes, of Fastify's router (a URL it cannot decode) and those written past Fastify (SSE,
 * /media bodies). What Node's parser refuses carries it in answerAndClose.
 */
export function noSniff(app: FastifyInstance): void {
  app.server.prependListener('request', (_req: IncomingMessage, res: ServerResponse) => {
    res.setHeader('x-content-type-options', 'nosniff');
  });
}

/**
 * The body deadline of every route on `app` (an onRequest hook, so register it before the
 * routes): a body not fully arrived requestTimeoutMs after its headers is answered 408, in
 * the shape `answer` gives for the request, and its socket closed. The deadline stops at the
 * end of the body: a long answer (an SSE stream of generated text) is not cut. A `longBody`
 * route (uploads) has no deadline but an idle timeout: a body that sends no byte for
 * uploadIdleTimeoutMs has its socket closed, with no answer (the client is gone or stuck; a
 * tus client asks for the offset and resumes).
 */
export function bodyDeadline(app: FastifyInstance, o: { timeouts: ServerTimeouts; answer: Answer<FastifyRequest> }) {
  const { requestTimeoutMs, uploadIdleTimeoutMs = requestTimeoutMs } = o.timeouts;
  app.addHook('onRequest', async (req, reply) => {
    if (req.raw.complete) return;
    if (req.routeOptions.config.longBody) idleGuard(req, uploadIdleTimeoutMs);
    else deadline(req, reply, requestTimeoutMs, o.answer);
  });
}

/** Calls `stop` once the request is over, its body in or its socket gone. */
function untilDone(raw: IncomingMessage, stop: () => void): void {
  raw.once('end', stop);
  raw.once('close', stop);
}

function deadline(req: FastifyRequest, reply: FastifyReply, ms: number, answer: Answer<FastifyRequest>): void {
  const timer = setTimeout(() => {
    const { raw } = req;
    if (raw.complete || raw.socket.destroyed) return;
    // An answer already on its way (a route that did not read the body): only the socket goes.
    if (reply.raw.headersSent) return void raw.socket.destroy();
    const { status, body } = answer(new RequestTimeoutError(`the request did not arrive in full within ${ms} ms`), req);
    answerAndClose(raw.socket, status, body);
  }, ms).unref();
  untilDone(req.raw, () => clearTimeout(timer));
}

/**
 * Closes the socket of a body that sends nothing for `ms`. Bytes waiting in the request's
 * buffer count as activity: then the route is the slow one (its disk), not the client.
 */
function idleGuard(req: FastifyRequest, ms: number): void {
  const { raw } = req;
  const socket = raw.socket;
  let seen = socket.bytesRead;
  let lastByteAt = performance.now();
  const sweep = setInterval(() => {
    if (raw.complete || socket.destroyed) return clearInterval(sweep);
    if (socket.bytesRead !== seen || raw.readableLength > 0) {
      seen = socket.bytesRead;
      lastByteAt = performance.now();
    } else if (performance.now() - lastByteAt >= ms) {
      clearInterval(sweep);
      req.log.info({ idleMs: ms }, 'the request body sent nothing for too long; connection closed');
      socket.destroy();
    }
  }, sweepEvery(ms)).unref();
  untilDone(raw, () => clearInterval(sweep));
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
 * it (headers that outlive the request timeout: 408; headers too large: 431; bytes that are
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
    const { status, body } = opts.answer(parserError(err, opts.requestTimeoutMs), socket);
    answerAndClose(socket, status, body);
  };
}

/** Writes a whole JSON answer straight onto `socket` and closes it (no request of Node's to answer through). */
function answerAndClose(socket: Socket, status: number, answer: object): void {
  const body = JSON.stringify(answer);
  if (socket.writable)
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\ncontent-type: application/json; charset=utf-8\r\nx-content-type-options: nosniff\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  socket.destroy();
}

/**
 * Closes `app` without waiting out its keep-alive sockets. Node's server.close() ends only the
 * sockets idle at that moment: one whose request was in flight stays open after its answer
 * until keepAliveTimeout (72 s by default), and a graceful stop waited that long. The idle
 * ones are closed again every 100 ms until the server has closed; a request in flight is
 * never cut.
 */
export async function closeApp(app: FastifyInstance): Promise<void> {
  const sweep = setInterval(() => app.server.closeIdleConnections(), 100);
  try {
    await app.close();
  } finally {
    clearInterval(sweep);
  }
}

/**
 * Fails as listen would (EADDRINUSE, EACCES, EADDRNOTAVAIL) when `port` on `host` cannot be
 * had, and lets it go again at once. A server checks this before it spends its start-up (the
 * database, migrations, engines) on a port it will not get: a second `mediaplane start` would
 * otherwise report the database it cannot share instead of the port. Port 0 is always free.
 */
export async function assertPortFree(host: string, port: number): Promise<void> {
  if (port === 0) return;
  const probe = createServer();
  await new Promise<void>((resolve, reject) => {
    probe.once('error', reject);
    probe.listen({ host, port, exclusive: true }, resolve);
  });
  await new Promise<void>((resolve) => probe.close(() => resolve()));
}
