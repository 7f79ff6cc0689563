// The SSE relay: a committed stream goes on to the client chunk by chunk, with backpressure.
// This is the hot path (one SSE event per token), so a batch of token chunks passes as the
// bytes that came, unparsed, and nothing here allocates per chunk. After the first token a
// failure is told to the client as `event: error` (API.md section B). The usage chunk, which
// every orchestrator sends, is read for billing and goes on only when the client asked for it
// (stream_options.include_usage, as OpenAI: a client reading `chunk.choices[0]` of every
// chunk would break on it, issue #17).

import type { ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { MediaplaneError, UpstreamFailedError } from '../../lib/errors.ts';
import { drained, formatSse, type SseBatch } from '../../lib/sse.ts';
import type { Usage } from '../protocol/index.ts';
import type { OpenAiChunk } from '../openai-wire/index.ts';
import type { Committed } from './chat-attempt.ts';

export interface RelayOptions {
  /** stream_options.include_usage: the usage chunk goes on to the client. */
  includeUsage: boolean;
  /**
   * Rewrites each chunk's JSON (POST /v1/completions' text_completion objects); every batch is
   * then parsed. Unset: chunks pass as they came.
   */
  rewrite?: ((data: string) => string) | undefined;
}

export interface Relayed {
  /** The usage chunk, when the answer reached its end. */
  usage?: Usage;
  /** Token chunks that went to the client (what is charged when no usage came). */
  delivered: number;
}

/**
 * Relays a committed stream; returns what was delivered. Chunks pass as the orchestrator sent
 * them (it already uses this request's id): a batch of token chunks only goes on as the bytes
 * that came, untouched; a batch with an error, the usage chunk or [DONE] in it (as a rule the
 * last) is parsed. What one network read brought goes on as one write.
 */
export async function relay(
  deps: { log: Logger; idleTimeoutMs: number },
  o: Committed,
  res: ServerResponse,
  opts: RelayOptions,
): Promise<Relayed> {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  const got: Delivered = { delivered: 0 };
  const result = (): Relayed =>
    got.usage ? { usage: got.usage, delivered: got.delivered } : { delivered: got.delivered };
  let batch = o.first;
  try {
    for (;;) {
      const r = (opts.rewrite ? undefined : tokenChunks(batch, got)) ?? relayEvents(batch, got, opts);
      if (r.end === 'done') {
        res.end(r.out);
        return result();
      }
      if (r.end === 'error') {
        if (r.out.length > 0) res.write(r.out);
        throw new UpstreamFailedError('the orchestrator failed during the answer');
      }
      if (!res.write(r.out)) await drained(res);
      if (res.destroyed) {
        o.attempt.controller.abort();
        return { delivered: got.delivered };
      }
      const next = await o.attempt.next(o.events, deps.idleTimeoutMs);
      if (!next) throw new UpstreamFailedError('the orchestrator closed the answer before its end');
      batch = next;
    }
  } catch (err) {
    o.attempt.controller.abort();
    if (res.destroyed) return { delivered: got.delivered };
    const e =
      err instanceof MediaplaneError
        ? err
        : new UpstreamFailedError('the orchestrator connection broke during the answer', { cause: err });
    deps.log.warn({ err: e.message }, 'answer failed after its first token');
    res.end(
      formatSse({
        event: 'error',
        data: JSON.stringify({ error: { message: e.message, type: 'server_error', code: e.code } }),
      }),
    );
    return result();
  } finally {
    o.attempt.done();
  }
}

interface Delivered {
  delivered: number;
  usage?: Usage | undefined;
}

interface Batch {
  out: string | Buffer;
  /** 'done': [DONE] came (out ends with it); 'error': an error event came after out's events. */
  end?: 'done' | 'error';
}

// A batch with none of these in it is token chunks only. A token whose text happens to
// contain one is merely parsed like the last batch.
const MARKERS = ['event:', '[DONE]', '"usage":'];

/** A batch of token chunks only, passed on as the bytes that came; undefined for any other. */
function tokenChunks(batch: SseBatch, got: Delivered): Batch | undefined {
  const bytes = batch.bytes;
  if (!bytes || MARKERS.some((m) => bytes.includes(m))) return undefined;
  got.delivered += batch.count;
  return { out: bytes };
}

/** Parses a batch with more than token chunks in it (the usage chunk, [DONE], an error), or any batch to rewrite. */
function relayEvents(batch: SseBatch, got: Delivered, opts: RelayOptions): Batch {
  let out = '';
  for (const ev of batch.events) {
    if (ev.event === 'error') return { out, end: 'error' };
    if (ev.data === '[DONE]') return { out: `${out}data: [DONE]\n\n`, end: 'done' };
    if (ev.data.includes('"usage":{')) {
      got.usage = (JSON.parse(ev.data) as OpenAiChunk).usage ?? undefined;
      if (!opts.includeUsage) continue;
    } else got.delivered++;
    out += formatSse({ data: opts.rewrite ? opts.rewrite(ev.data) : ev.data });
  }
  return { out };
}
