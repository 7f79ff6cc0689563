// Tool calls on the llama.cpp engine. A forced call (tool_choice "required" or a named function)
// is generated under a grammar as one JSON document `{"name": ..., "arguments": {...}}`
// (json-schema/ toolCallSchema); ForcedToolCall turns that text, as it comes, into the pieces
// OpenAI streams: the id and name first, then the arguments text in pieces.

import { type ToolCallPiece, toolCallId } from '../../engine.ts';

// The grammar writes the properties in the schema's order, with JSON whitespace between tokens.
const HEAD = /^\s*\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"arguments"\s*:\s*/;
/** What may still be the end of the document rather than of the arguments: `}` and whitespace. */
const TAIL = /\s*(\}\s*)?$/;

/**
 * The text of one forced call as it is generated, as tool-call pieces. The arguments are sent as
 * they come, but for a last `}` and whitespace, which may be the end of the whole document.
 */
export class ForcedToolCall {
  readonly #id = toolCallId();
  #text = '';
  /** Where the arguments start in #text, once the name is known. */
  #start = -1;
  /** Characters of the arguments sent. */
  #sent = 0;

  /** Pieces for `text`, the next part of the document. */
  push(text: string): ToolCallPiece[] {
    this.#text += text;
    if (this.#start < 0) {
      const head = HEAD.exec(this.#text);
      if (!head?.[1]) return [];
      this.#start = head[0].length;
      const args = this.#available();
      return [{ call: 0, id: this.#id, name: JSON.parse(head[1]) as string, arguments: args }];
    }
    const args = this.#available();
    return args ? [{ call: 0, arguments: args }] : [];
  }

  /**
   * The rest once generation ended: the arguments' last piece when the document is whole
   * (`complete`), else whatever came (cut off by max_tokens or a stop string).
   */
  end(): { pieces: ToolCallPiece[]; complete: boolean } {
    const doc = parse(this.#text);
    if (this.#start < 0) {
      // The name came after the arguments, or never: one piece, the whole call.
      if (!doc) return { pieces: [], complete: false };
      return {
        pieces: [{ call: 0, id: this.#id, name: doc.name, arguments: JSON.stringify(doc.arguments) }],
        complete: true,
      };
    }
    const rest = doc ? this.#text.slice(this.#start).replace(TAIL, '') : this.#text.slice(this.#start);
    const piece = rest.slice(this.#sent);
    this.#sent = rest.length;
    return { pieces: piece ? [{ call: 0, arguments: piece }] : [], complete: doc !== undefined };
  }

  /** The arguments text not sent yet but for what may be the document's end. */
  #available(): string {
    const args = this.#text.slice(this.#start);
    const safe = args.length - (TAIL.exec(args)?.[0].length ?? 0);
    if (safe <= this.#sent) return '';
    const piece = args.slice(this.#sent, safe);
    this.#sent = safe;
    return piece;
  }
}

function parse(text: string): { name: string; arguments: unknown } | undefined {
  try {
    const doc: unknown = JSON.parse(text);
    if (typeof doc !== 'object' || doc === null || !('name' in doc) || typeof doc.name !== 'string') return undefined;
    return { name: doc.name, arguments: 'arguments' in doc ? doc.arguments : {} };
  } catch {
    return undefined;
  }
}
