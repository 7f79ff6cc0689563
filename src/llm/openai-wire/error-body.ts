// An OpenAI-compatible server's error body, read in one place for every client of one (issue
// #26): the gateway reading its orchestrators (chat and embeddings alike) and the vLLM engine
// reading vLLM. As openai-node's APIError.generate, it takes `error` off the body whatever its
// form: `{error: {message, code, param}}`, vLLM's older flat `{message, param}`, or
// `{error: "text"}`; a body that is no JSON is its own text, cut short. What a status means
// (the caller's mistake, a busy server, a failure) is the client's to say: the gateway fails
// over where the vLLM engine answers.

/** An error answer of an OpenAI-compatible server. */
export interface ErrorBody {
  /** The HTTP status it came with. */
  status: number;
  message: string;
  code?: string | undefined;
  param?: string | undefined;
}

/** The longest raw text kept as the message of a body that says none. */
const DEFAULT_MAX_CHARS = 300;

/** Reads the error answer `text` that came with `status`. */
export function readErrorBody(status: number, text: string, o: { maxChars?: number } = {}): ErrorBody {
  const fallback = { status, message: text.slice(0, o.maxChars ?? DEFAULT_MAX_CHARS) || `status ${status}` };
  let j: unknown;
  try {
    j = JSON.parse(text);
  } catch {
    return fallback;
  }
  if (typeof j !== 'object' || j === null) return fallback;
  const outer = j as { error?: unknown };
  const e = typeof outer.error === 'object' && outer.error !== null ? outer.error : j;
  const field = (name: string): string | undefined => {
    const v: unknown = Reflect.get(e, name);
    return typeof v === 'string' ? v : undefined;
  };
  const message = field('message') ?? (typeof outer.error === 'string' ? outer.error : undefined);
  if (message === undefined) return fallback;
  return { status, message, code: field('code'), param: field('param') };
}
