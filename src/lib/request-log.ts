import { type FastifyInstance, type FastifyReply, LogController } from 'fastify';
import { answeredReason } from './wire-errors.ts';

// One log line a request, written when its answer is done (method, URL with its secrets
// scrubbed by the logger, status, duration), and for a 4xx the reason the client was given.
// Fastify's own request logging writes two lines a request ("incoming request", "request
// completed") and neither says why a request was refused: a person reading the log of a 422
// saw the status and had to repeat the request to learn what was wrong. A route whose
// requests are routine (probes, the console's files, /media) sets its logLevel to
// routineRouteLevel (lib/log.ts), and its line is then written at debug only. The fields are
// under `request`, which the pretty format leaves out: its message already says them.

/** The server options that turn Fastify's two lines off; requestLog writes the one line instead. */
export function oneLineRequestLogging() {
  return { logController: new LogController({ disableRequestLogging: true }) };
}

/** The reasons given by 4xx answers above this size are not read (no error body is this big). */
const MAX_REASON_BODY = 64 * 1024;

/** The reason a 4xx JSON answer gives, read from its body as sent. */
function reasonOf(reply: FastifyReply, payload: unknown): string | undefined {
  if (typeof payload !== 'string' || payload.length > MAX_REASON_BODY) return undefined;
  if (!String(reply.getHeader('content-type') ?? '').includes('json')) return undefined;
  try {
    return answeredReason(JSON.parse(payload));
  } catch {
    return undefined;
  }
}

/**
 * Writes the request line of every route of `app` (call it before the routes are added). The
 * reason is taken from the answer's body as sent, so every way a route answers a 4xx (thrown
 * and mapped, or sent as it is) has one: the text the client read, which holds no secret.
 */
export function requestLog(app: FastifyInstance): void {
  const reasons = new WeakMap<FastifyReply, string>();
  app.addHook('onSend', async (_req, reply, payload) => {
    if (reply.statusCode >= 400 && reply.statusCode < 500) {
      const reason = reasonOf(reply, payload);
      if (reason !== undefined) reasons.set(reply, reason);
    }
    return payload;
  });
  app.addHook('onResponse', async (req, reply) => {
    const status = reply.statusCode;
    const ms = Math.round(reply.elapsedTime);
    const reason = reasons.get(reply);
    const request = { method: req.method, url: req.url, statusCode: status, ms, ...(reason ? { reason } : {}) };
    req.log.info({ request }, `${req.method} ${req.url} ${status} ${ms} ms${reason ? `: ${reason}` : ''}`);
  });
}
