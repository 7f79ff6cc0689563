import pino, { type DestinationStream, type LevelWithSilent, type Logger } from 'pino';
import { isColorSupported, prettyFactory } from 'pino-pretty';

// Secrets never reach a log line (STYLE.md, practice 11), whatever is logged and whatever
// fails (issue #15). A database error is the hard case: PGlite's errors carry the SQL and
// its bound values (`query`, `params`: a task's params, S3 secret included), pg's carry the
// JSON around a bad character (`where`) and a failing row (`detail`). So every object logged
// passes through `scrubValue` below, at any depth, before pino writes it: names that hold secrets
// or echo SQL values are censored, errors are copied the same way (their cause included),
// and text is cleaned of URL query strings (a signed URL's signature) and `secret: value`
// pairs quoted in messages. The redact paths are a second net for what serializers add.

const CENSOR = '***';

/** Property names whose values are secrets wherever they appear (any case, any depth). */
const SECRET_NAME =
  /secret|passw(or)?d|credential|authori[sz]ation|cookie|proof|token$|signature|salt$|key$|access[-_]?key/i;

/** Fields of database errors and queries that echo SQL text or the values bound to it. */
const ECHO_NAMES = new Set([
  'query',
  'params',
  'parameters',
  'values',
  'detail',
  'where',
  'internalQuery',
  'queryOptions',
  'sql',
]);

// `scheme://host/path?query` keeps `scheme://host/path?***`; the query may be a signature.
const URL_QUERY = /\b([a-z][a-z0-9+.-]*:\/\/[^\s?#"'<>\\]*)\?[^\s"'<>\\]*/gi;
// Secret names inside text: a JSON member (`"secretAccessKey":"v`, also escaped once, also
// cut short as PostgreSQL quotes it) or a `name=value` pair (a query string, a form).
const SECRET_WORD = String.raw`(?:\w*(?:secret|passw(?:or)?d|credential|signature|proof|api[-_]?key|access[-_]?key|stream[-_]?key|authori[sz]ation)\w*|\w*token|jwt|streamid)`;
const SECRET_MEMBER = new RegExp(String.raw`(\\?"${SECRET_WORD}\\?"\s*:\s*\\?")[^"\\]*`, 'gi');
const SECRET_PARAM = new RegExp(String.raw`(\b${SECRET_WORD}=)[^\s&;,"'<>]+`, 'gi');
// A query parameter whose name is percent-encoded: Fastify's query parser decodes names, so
// `?%74oken=` is `token` to the route that reads it, and must be to the scrubber too.
// The lookahead asks for one escape; the name itself is matched without backtracking.
const ENCODED_PARAM = /(?<![\w.~%-])((?=[\w.~-]*%[0-9a-f]{2})(?:[\w.~-]|%[0-9a-f]{2})+=)[^\s&;,"'<>]+/gi;
const SECRET_NAME_ONLY = new RegExp(String.raw`\b${SECRET_WORD}=$`, 'i');
const AUTH_SCHEME = /\b(Bearer|Basic)\s+[\w.~+/=-]+/g;
// An RTMP publish URL holds the stream key as its last path segment (rtmp://HOST/APP/KEY,
// Adobe's RTMP spec: the app, then the stream name): the segment after the app is censored.
const RTMP_KEY = /\b(rtmps?:\/\/[^\s/"'<>\\]+\/[^\s/"'<>\\?]+\/)[^\s"'<>\\?]+/gi;

const MAX_DEPTH = 12;

/** `name=` percent-decoded (as a query parser reads it); as written when it is no valid encoding. */
function decodedName(name: string): string {
  try {
    return decodeURIComponent(name);
  } catch {
    return name;
  }
}

/** An encoded `name=value` pair with its value censored when the decoded name is a secret's. */
const scrubEncodedParam = (pair: string, name: string): string =>
  SECRET_NAME_ONLY.test(decodedName(name)) ? `${name}${CENSOR}` : pair;

/** `text` without URL query strings and quoted secret values. */
export function scrubText(text: string): string {
  return text
    .replace(URL_QUERY, `$1?${CENSOR}`)
    .replace(SECRET_MEMBER, `$1${CENSOR}`)
    .replace(SECRET_PARAM, `$1${CENSOR}`)
    .replace(ENCODED_PARAM, scrubEncodedParam)
    .replace(AUTH_SCHEME, `$1 ${CENSOR}`)
    .replace(RTMP_KEY, `$1${CENSOR}`);
}

const isPlainObject = (v: object): boolean => {
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
};

function scrubEntry(name: string, value: unknown, depth: number, seen: WeakSet<object>): unknown {
  if (value === undefined || value === null) return value;
  if (SECRET_NAME.test(name) || ECHO_NAMES.has(name)) return CENSOR;
  return scrubValue(value, depth + 1, seen);
}

function scrubEntries(
  from: object,
  into: Record<string, unknown>,
  depth: number,
  seen: WeakSet<object>,
): Record<string, unknown> {
  for (const [name, value] of Object.entries(from))
    if (!(name in into)) into[name] = scrubEntry(name, value, depth, seen);
  return into;
}

/** An error as a plain object: type, message and stack cleaned, own fields and cause scrubbed. */
function scrubError(err: Error, depth: number, seen: WeakSet<object>): Record<string, unknown> {
  const out: Record<string, unknown> = { type: err.constructor.name || err.name, message: scrubText(err.message) };
  if (err.stack !== undefined) out.stack = scrubText(err.stack);
  scrubEntries(err, out, depth, seen);
  // `new Error(m, { cause })` makes `cause` an own but non-enumerable property.
  if (err.cause !== undefined && !('cause' in out)) out.cause = scrubValue(err.cause, depth + 1, seen);
  if (err instanceof AggregateError && !('errors' in out)) out.errors = scrubValue(err.errors, depth + 1, seen);
  return out;
}

/**
 * A copy of `value` that is safe to log. Plain objects, arrays and errors are copied and
 * scrubbed; objects with toJSON (URL, Date) are scrubbed as their JSON; other class
 * instances (Fastify's request and reply) are left to the serializers that know them.
 */
export function scrubValue(value: unknown, depth = 0, seen = new WeakSet<object>()): unknown {
  if (typeof value === 'string') return scrubText(value);
  if (typeof value !== 'object' || value === null) return value;
  if (seen.has(value)) return '[Circular]';
  if (depth > MAX_DEPTH) return '[too deep]';
  seen.add(value);
  if (value instanceof Error) return scrubError(value, depth, seen);
  if (Array.isArray(value)) return value.map((v: unknown) => scrubValue(v, depth + 1, seen));
  if (isPlainObject(value)) return scrubEntries(value, {}, depth, seen);
  const toJSON: unknown = Reflect.get(value, 'toJSON');
  if (typeof toJSON === 'function') return scrubValue(toJSON.call(value), depth + 1, seen);
  return value;
}

const scrubObject = (o: Record<string, unknown>): Record<string, unknown> => scrubEntries(o, {}, 0, new WeakSet());

interface LoggedRequest {
  method?: string;
  url?: string;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number };
}

/**
 * A request as Fastify's serializer writes it, with its URL scrubbed: the deep scrub leaves the
 * request object to its serializer, and an upload URL's query names its capability
 * (`?token=`, issue #27). This one replaces Fastify's (the logger's own serializers win).
 */
const requestSerializer = (req: LoggedRequest) => ({
  method: req.method,
  url: typeof req.url === 'string' ? scrubText(req.url) : req.url,
  host: req.host,
  remoteAddress: req.ip,
  remotePort: req.socket?.remotePort,
});

// Censored after the serializers ran (the deep scrub above runs before them).
const REDACT = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  '*.credentials',
  'params',
  '*.params',
  'query',
  '*.query',
];

/** How log lines are written: one JSON object a line, or human-readable text. */
export type LogFormat = 'json' | 'pretty';

/** The format MEDIAPLANE_LOG_FORMAT names; `auto` is pretty on a terminal, JSON otherwise. */
export function resolveLogFormat(setting: string, isTTY = process.stdout.isTTY === true): LogFormat {
  if (setting === 'json' || setting === 'pretty') return setting;
  return isTTY ? 'pretty' : 'json';
}

/**
 * Human-readable lines (pino-pretty), made in this process from the JSON line pino has just
 * serialized: scrubbing and redaction have already run, so the text shows no more than the
 * JSON would. Written synchronously (stdout by default), so a stopping process loses no line.
 */
function prettyDestination(to: DestinationStream | undefined): DestinationStream {
  const out = to ?? pino.destination({ dest: 1, sync: true });
  const pretty = prettyFactory({
    colorize: to === undefined && process.stdout.isTTY === true && isColorSupported,
    translateTime: 'SYS:HH:MM:ss.l',
    // `request`: a request line's fields, which its message says (lib/request-log.ts).
    ignore: 'pid,hostname,name,role,request',
    messageFormat: '{if role}{role}: {end}{msg}',
    singleLine: true,
  });
  return { write: (line: string) => void out.write(pretty(line)) };
}

/**
 * The log level of a route whose requests are routine (a gateway's poll of an orchestrator):
 * Fastify writes "incoming request" and "request completed" at info, so at info the route's
 * logger is raised to warn, and its lines are written only when the operator asks for debug
 * or trace. Its errors are still written.
 */
export function routineRouteLevel(level: string): LevelWithSilent {
  return level === 'info' ? 'warn' : (level as LevelWithSilent);
}

export function createLogger(opts: {
  level: string;
  destination?: DestinationStream;
  name?: string;
  /** json (the default) or pretty; `destination` then receives the pretty text. */
  format?: LogFormat;
}): Logger {
  const destination = opts.format === 'pretty' ? prettyDestination(opts.destination) : opts.destination;
  const logger = pino(
    {
      level: opts.level,
      name: opts.name ?? 'mediaplane',
      redact: { paths: REDACT, censor: CENSOR },
      // Replaces pino's err serializer (and Fastify's copy of it): `scrub` already made the
      // error a plain object, which that serializer would rebuild as an error of type Object.
      serializers: { err: (e: unknown) => scrubValue(e), req: requestSerializer },
      formatters: { log: scrubObject },
      // The message and its printf arguments: text built from a URL or an error message.
      hooks: {
        logMethod(args, method) {
          const clean = args.map((a: unknown) => (typeof a === 'string' ? scrubText(a) : a)) as typeof args;
          method.apply(this, clean);
        },
      },
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
  // pino writes a child's bindings once, when the child is made, past formatters.log, and it
  // gives children no bindings formatter: scrub them on the way in. Children inherit this
  // `child` from the root (pino makes them with Object.create), Fastify's included.
  const child = logger.child;
  logger.child = function (this: Logger, bindings, options) {
    return child.call(this, scrubObject(bindings), options);
  } as Logger['child'];
  return logger;
}

export type { Logger };
