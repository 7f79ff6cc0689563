// Server-sent events over fetch: EventSource cannot send an Authorization header, and the
// chat route is a POST. The decoder follows the WHATWG event-stream rules (fields `event`,
// `data`, `id`; `:` comments; CR, LF or CRLF line ends) and keeps a partial line, or a
// multi-byte character cut between two chunks, until the next chunk completes it.

export interface SseEvent {
  /** The `event:` field, `message` when the server gave none. */
  event: string;
  /** The `data:` lines joined by newlines. */
  data: string;
  id?: string;
}

/** Feed it text chunks; it calls `onEvent` for each complete event. */
export class SseDecoder {
  private buffer = '';
  private event = '';
  private data: string[] = [];
  private id: string | undefined;
  private readonly onEvent: (e: SseEvent) => void;

  constructor(onEvent: (e: SseEvent) => void) {
    this.onEvent = onEvent;
  }

  push(text: string): void {
    this.buffer += text;
    for (;;) {
      const end = this.buffer.search(/\r\n|\r|\n/);
      // A lone CR at the very end may be the first half of a CRLF: wait for the next chunk.
      if (end < 0 || (end === this.buffer.length - 1 && this.buffer[end] === '\r')) return;
      const line = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + (this.buffer.startsWith('\r\n', end) ? 2 : 1));
      this.line(line);
    }
  }

  private line(line: string): void {
    if (line === '') {
      this.dispatch();
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.event = value;
    else if (field === 'data') this.data.push(value);
    else if (field === 'id') this.id = value;
  }

  private dispatch(): void {
    if (this.data.length > 0) {
      const e: SseEvent = { event: this.event || 'message', data: this.data.join('\n') };
      if (this.id !== undefined) e.id = this.id;
      this.onEvent(e);
    }
    this.event = '';
    this.data = [];
  }
}

/** Reads an event-stream body to its end, event by event. */
export async function readSse(body: ReadableStream<Uint8Array>, onEvent: (e: SseEvent) => void): Promise<void> {
  const decoder = new SseDecoder(onEvent);
  const text = new TextDecoder();
  const reader = body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    decoder.push(text.decode(value, { stream: true }));
  }
  decoder.push(`${text.decode()}\n\n`);
}
