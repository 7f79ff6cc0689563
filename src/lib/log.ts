import pino, { type DestinationStream, type Logger } from 'pino';

// Secrets never reach a log line (STYLE.md, practice 11): request headers are not logged by
// default, and these paths are censored wherever an object carrying them is logged.
const REDACT = [
  'req.headers.authorization',
  'headers.authorization',
  '*.credentials',
  '*.*.credentials',
  'credentials',
  '*.secretAccessKey',
  '*.proof',
  '*.apiKey',
  '*.key',
  'params.input.credentials',
  'params.storage.credentials',
];

export function createLogger(opts: { level: string; destination?: DestinationStream; name?: string }): Logger {
  return pino(
    {
      level: opts.level,
      name: opts.name ?? 'mediaplane',
      redact: { paths: REDACT, censor: '***' },
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    opts.destination,
  );
}

export type { Logger };
