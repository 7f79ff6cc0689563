// Server-sent events: an incremental parser and a writer, with no domain knowledge.
// The parser follows the WHATWG HTML "event stream interpretation" rules
// (https://html.spec.whatwg.org/multipage/server-sent-events.html#parsing-an-event-stream):
// lines end in CRLF, LF or CR; `:` starts a comment; a blank line dispatches the event;
// several `data:` lines join with "\n". Bytes are decoded with a streaming TextDecoder, so a
// multi-byte UTF-8 character split across two network chunks is not mangled.

import type { Writable } from 'node:stream';

export interface SseEvent {
  /** The `event:` field; undefined means the default type, "message". */
  event?: string | undefined;
  data: string;
  id?: string | undefined;
  retry?: number | undefined;
}

export class SseParser {
  readonly #decoder = new TextDecoder('utf-8');
  #buffer = '';
  /** A chunk ended in CR: a LF at the start of the next chunk belongs to the same line end. */
  #pendingCr = false;
  #event: string | undefined;
  #data: string[] = [];
  #id: string | undefined;
  #retry: number | undefined;

  /** Feeds bytes (or text) and returns the events completed by them, in order. */
  push(chunk: Uint8Array | string): SseEvent[] {
    let text = typeof chunk === 'string' ? chunk : this.#decoder.decode(chunk, { stream: true });
    if (this.#pendingCr && text.startsWith('\n')) text = text.slice(1);
    this.#pendingCr = false;
    this.#buffer += text;
    return this.#drainLines();
  }

  /** Ends the stream: an event without its closing blank line is dropped, as the spec says. */
  end(): SseEvent[] {
    const rest = this.#decoder.decode();
    if (rest) this.#buffer += rest;
    this.#buffer = '';
    this.#resetEvent();
    return [];
  }

  #drainLines(): SseEvent[] {
    const out: SseEvent[] = [];
    let start = 0;
    for (;;) {
      const m = /\r\n|\r|\n/g;
      m.lastIndex = start;
      const hit = m.exec(this.#buffer);
      if (!hit) break;
      // A CR as the last character may be the first half of CRLF: remember it.
      if (hit[0] === '\r' && hit.index === this.#buffer.length - 1) this.#pendingCr = true;
      const ev = this.#line(this.#buffer.slice(start, hit.index));
      if (ev) out.push(ev);
      start = hit.index + hit[0].length;
    }
    this.#buffer = this.#buffer.slice(start);
    return out;
  }

  #line(line: string): SseEvent | undefined {
    if (line === '') return this.#dispatch();
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'event':
        this.#event = value;
        break;
      case 'data':
        this.#data.push(value);
        break;
      case 'id':
        if (!value.includes('\0')) this.#id = value;
        break;
      case 'retry':
        if (/^\d+$/.test(value)) this.#retry = Number(value);
        break;
      default:
        break; // unknown fields are ignored (spec)
    }
    return undefined;
  }

  #dispatch(): SseEvent | undefined {
    if (this.#data.length === 0) {
      this.#event = undefined;
      return undefined;
    }
    const ev: SseEvent = { data: this.#data.join('\n') };
    if (this.#event !== undefined) ev.event = this.#event;
    if (this.#id !== undefined) ev.id = this.#id;
    if (this.#retry !== undefined) ev.retry = this.#retry;
    this.#resetEvent();
    return ev;
  }

  #resetEvent(): void {
    this.#event = undefined;
    this.#data = [];
    this.#retry = undefined;
  }
}

const LF2 = Buffer.from('\n\n');
const CR = 0x0d;

/** Parses a whole byte stream into events as they complete. */
export async function* parseSse(source: AsyncIterable<Uint8Array | string>): AsyncGenerator<SseEvent> {
  const parser = new SseParser();
  for await (const chunk of source) yield* parser.push(chunk);
  parser.end();
}

/**
 * What one network read completed: the bytes of whole events when the stream is framed with LF
 * line ends (what Mediaplane, and most servers, write), so a relay can pass them on untouched
 * without decoding, parsing and re-encoding each one; otherwise only the parsed events.
 * Parsing a batch on its own does not carry the last event ID over from earlier batches.
 */
export class SseBatch {
  /** Whole LF-framed events as they arrived, or undefined where the stream used CR line ends. */
  readonly bytes: Buffer | undefined;
  #events: SseEvent[] | undefined;
  constructor(bytes: Buffer | undefined, events?: SseEvent[]) {
    this.bytes = bytes;
    this.#events = events;
  }

  get events(): SseEvent[] {
    this.#events ??= new SseParser().push(this.bytes ?? '');
    return this.#events;
  }

  /** How many events the batch holds, counted without parsing where there are bytes (blank lines). */
  get count(): number {
    if (!this.bytes) return this.events.length;
    let n = 0;
    for (let at = this.bytes.indexOf(LF2); at !== -1; at = this.bytes.indexOf(LF2, at + 2)) n++;
    return n;
  }
}

/**
 * Cuts a byte stream into batches of whole events, one per chunk that completed any (never an
 * empty batch). LF framing is cut at the last blank line with no decoding; the first CR seen
 * switches the stream to the full parser, since CRLF and CR framing cannot be cut that way.
 */
export class SseBatcher {
  #rest: Buffer | undefined;
  #parser: SseParser | undefined;

  push(chunk: Buffer): SseBatch | undefined {
    if (this.#parser || chunk.includes(CR)) return this.#parse(chunk);
    const buf = this.#rest ? Buffer.concat([this.#rest, chunk]) : chunk;
    const end = buf.lastIndexOf(LF2);
    if (end === -1) {
      this.#rest = buf;
      return undefined;
    }
    this.#rest = end + 2 < buf.length ? buf.subarray(end + 2) : undefined;
    return new SseBatch(buf.subarray(0, end + 2));
  }

  #parse(chunk: Buffer): SseBatch | undefined {
    if (!this.#parser) {
      this.#parser = new SseParser();
      // What is held back completes no event (it has no blank line): the parser takes it on.
      if (this.#rest) this.#parser.push(this.#rest);
      this.#rest = undefined;
    }
    const events = this.#parser.push(chunk);
    return events.length > 0 ? new SseBatch(undefined, events) : undefined;
  }
}

/** One event in wire form. Multi-line data becomes several `data:` lines. */
export function formatSse(ev: SseEvent): string {
  let out = '';
  if (ev.event !== undefined) out += `event: ${oneLine(ev.event, 'event')}\n`;
  if (ev.id !== undefined) out += `id: ${oneLine(ev.id, 'id')}\n`;
  if (ev.retry !== undefined) out += `retry: ${Math.trunc(ev.retry)}\n`;
  // One-line data (JSON always is) skips the split: this runs once per relayed chunk.
  if (!/[\r\n]/.test(ev.data)) return `${out}data: ${ev.data}\n\n`;
  for (const line of ev.data.split(/\r\n|\r|\n/)) out += `data: ${line}\n`;
  return `${out}\n`;
}

function oneLine(s: string, field: string): string {
  if (/[\r\n]/.test(s)) throw new TypeError(`SSE ${field} must not contain a line break`);
  return s;
}

/** Resolves when `out` can take more bytes again, or is gone (closed, failed). */
export function drained(out: Writable): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = (): void => {
      out.off('drain', done).off('close', done).off('error', done);
      resolve();
    };
    out.on('drain', done).on('close', done).on('error', done);
  });
}

/**
 * Writes events to a stream (an HTTP response) and honours backpressure: `send` resolves
 * when the bytes were accepted or the peer went away (then `closed` is true and further
 * writes are dropped), so a slow client slows the producer instead of filling memory.
 */
export class SseWriter {
  readonly #out: Writable;
  constructor(out: Writable) {
    this.#out = out;
  }

  get closed(): boolean {
    return this.#out.destroyed || this.#out.writableEnded;
  }

  async send(ev: SseEvent | string): Promise<void> {
    await this.raw(typeof ev === 'string' ? formatSse({ data: ev }) : formatSse(ev));
  }

  /** Writes already-formatted SSE text. */
  async raw(text: string): Promise<void> {
    if (this.closed) return;
    if (this.#out.write(text)) return;
    await drained(this.#out);
  }

  end(): void {
    if (!this.closed) this.#out.end();
  }
}
