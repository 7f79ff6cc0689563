// OpenAI chat messages as node-llama-cpp's chat history. node-llama-cpp has no tool role: a
// function call and its result are one item of the model's response ({type: 'functionCall',
// name, params, result}), and the chat wrapper renders both with the model's own template. So an
// assistant message's tool_calls become such items, each completed by the tool message that
// answers it (tool_call_id), and the assistant's next message continues the same response.

import type { ChatHistoryItem, ChatModelFunctionCall, ChatModelResponse } from 'node-llama-cpp';
import { ValidationError } from '../../../../lib/errors.ts';
import type { ChatMessage } from '../../../protocol/types.ts';

/** JSON text as a value (what the chat wrapper writes back with JSON.stringify), else the text itself. */
function jsonOrText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

interface Pending {
  item: ChatModelResponse;
  /** The calls of the last assistant message still waiting for their tool message, by id. */
  calls: Map<string, ChatModelFunctionCall>;
  /** Whether a tool message answered a call of this response (the next assistant message continues it). */
  answered: boolean;
}

/**
 * The history to generate from: the messages, then the model response to generate. After tool
 * results (the last message a tool message) that response is the one the calls belong to, so the
 * model goes on from the results as its template has it; otherwise a new, empty one.
 */
export function chatHistory(messages: readonly ChatMessage[]): ChatHistoryItem[] {
  const items: ChatHistoryItem[] = [];
  let open: Pending | undefined;
  for (const [i, m] of messages.entries()) {
    if (m.role === 'system' || m.role === 'user') {
      items.push(m.role === 'system' ? { type: 'system', text: m.content } : { type: 'user', text: m.content });
      open = undefined;
    } else if (m.role === 'assistant') {
      open = assistant(items, m, open?.answered ? open : undefined);
    } else {
      answer(open, m, i);
    }
  }
  if (!open?.answered || messages.at(-1)?.role !== 'tool') items.push({ type: 'model', response: [] });
  return items;
}

/** An assistant message: its text and calls, continuing `after` (a response whose calls were answered). */
function assistant(items: ChatHistoryItem[], m: ChatMessage, after: Pending | undefined): Pending {
  const pending: Pending = after ?? { item: { type: 'model', response: [] }, calls: new Map(), answered: false };
  if (!after) items.push(pending.item);
  pending.calls = new Map();
  pending.answered = false;
  if (m.content) pending.item.response.push(m.content);
  for (const call of m.tool_calls ?? []) {
    const item: ChatModelFunctionCall = {
      type: 'functionCall',
      name: call.function.name,
      params: jsonOrText(call.function.arguments),
      result: undefined,
    };
    pending.item.response.push(item);
    pending.calls.set(call.id, item);
  }
  return pending;
}

/** A tool message: the result of the call it names, which an earlier assistant message made. */
function answer(open: Pending | undefined, m: ChatMessage, i: number): void {
  const call = m.tool_call_id === undefined ? undefined : open?.calls.get(m.tool_call_id);
  if (!open || !call)
    throw new ValidationError(
      `messages[${i}].tool_call_id: ${JSON.stringify(m.tool_call_id)} is not the id of a tool call of the assistant message before it`,
      { param: `messages[${i}].tool_call_id` },
    );
  call.result = jsonOrText(m.content);
  open.answered = true;
}
