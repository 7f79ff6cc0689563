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
