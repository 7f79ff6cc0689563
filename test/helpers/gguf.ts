// Test models made at test time: a copy of a shared GGUF with other metadata (a tool-capable chat
// template), written under os.tmpdir() laid out <dir>/<org>/<name>/model.gguf as the model
// directory wants it. Weights are never committed; the copies are removed with their directory.

import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// GGUF v2/v3 (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md): "GGUF", version u32,
// tensor count u64, metadata count u64; each metadata pair is a string key, a u32 type and a
// value; then the tensor infos, padding to general.alignment (32 when absent), the tensor data.
const MAGIC = 0x46554747; // "GGUF" little-endian
const STRING = 8;
const ARRAY = 9;
/** Byte sizes of the fixed-size value types, by type id. */
const FIXED: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };

class Reader {
  pos = 0;
  readonly buf: Buffer;
  constructor(buf: Buffer) {
    this.buf = buf;
  }
  u32(): number {
    const v = this.buf.readUInt32LE(this.pos);
    this.pos += 4;
    return v;
  }
  u64(): number {
    const v = Number(this.buf.readBigUInt64LE(this.pos));
    this.pos += 8;
    return v;
  }
  string(): string {
    const len = this.u64();
    const s = this.buf.toString('utf8', this.pos, this.pos + len);
    this.pos += len;
    return s;
  }
  /** Skips a value of `type`, returning it when it is a u32 (general.alignment) or a string. */
  value(type: number): number | string | undefined {
    if (type === STRING) return this.string();
    if (type === ARRAY) {
      const inner = this.u32();
      const count = this.u64();
      for (let i = 0; i < count; i++) this.value(inner);
      return undefined;
    }
    const size = FIXED[type];
    if (size === undefined) throw new Error(`GGUF: unknown value type ${type} at byte ${this.pos}`);
    const v = type === 4 ? this.buf.readUInt32LE(this.pos) : undefined;
    this.pos += size;
    return v;
  }
}

function ggufString(s: string): Buffer {
  const bytes = Buffer.from(s, 'utf8');
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(bytes.length));
  return Buffer.concat([len, bytes]);
}

function stringPair(key: string, value: string): Buffer {
  const type = Buffer.alloc(4);
  type.writeUInt32LE(STRING);
  return Buffer.concat([ggufString(key), type, ggufString(value)]);
}

const pad = (n: number, alignment: number): number => Math.ceil(n / alignment) * alignment;

/**
 * `source` (a GGUF file's bytes) with the string metadata `strings` set (replaced or added); the
 * tensor infos and data are copied unchanged (their offsets are relative to the data section).
 */
export function withStringMetadata(source: Buffer, strings: Record<string, string>): Buffer {
  const r = new Reader(source);
  if (r.u32() !== MAGIC) throw new Error('not a GGUF file');
  const version = r.u32();
  if (version < 2) throw new Error(`GGUF version ${version} is not supported (2 or 3)`);
  const tensors = r.u64();
  const pairs = r.u64();
  const kept: Buffer[] = [];
  let alignment = 32;
  for (let i = 0; i < pairs; i++) {
    const start = r.pos;
    const key = r.string();
    const value = r.value(r.u32());
    if (key === 'general.alignment' && typeof value === 'number') alignment = value;
    if (!Object.hasOwn(strings, key)) kept.push(source.subarray(start, r.pos));
  }
  const infosStart = r.pos;
  for (let i = 0; i < tensors; i++) {
    r.string();
    const dims = r.u32();
    r.pos += 8 * dims + 4 + 8; // dimensions, type, offset
  }
  const infos = source.subarray(infosStart, r.pos);
  const data = source.subarray(pad(r.pos, alignment));
  const added = Object.entries(strings).map(([k, v]) => stringPair(k, v));
  const head = Buffer.alloc(24);
  head.writeUInt32LE(MAGIC, 0);
  head.writeUInt32LE(version, 4);
  head.writeBigUInt64LE(BigInt(tensors), 8);
  head.writeBigUInt64LE(BigInt(kept.length + added.length), 16);
  const meta = Buffer.concat([head, ...kept, ...added, infos]);
  return Buffer.concat([meta, Buffer.alloc(pad(meta.length, alignment) - meta.length), data]);
}

/**
 * Qwen 2.5's chat template (tools in the system prompt, calls as <tool_call> JSON, results as
 * <tool_response>): node-llama-cpp reads its function-call syntax from the template itself
 * (JinjaTemplateChatWrapper), which is what a model with a tool-capable template gets.
 */
export const TOOL_CHAT_TEMPLATE = `{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
`;

export interface TemplateModel {
  /** The model directory to serve (MEDIAPLANE_MODELS_DIR). */
  dir: string;
  /** The model's id in it. */
  id: string;
  remove(): Promise<void>;
}

/**
 * TOOL_CHAT_TEMPLATE with calls written `Ω<name>(<arguments>)`: "Ω" is one token of Llama 2's
 * vocabulary, so a logit_bias on it makes even a random model start a call, and node-llama-cpp's
 * function calling (which reads this syntax from the template) takes it from there.
 */
export const ONE_TOKEN_CALL_TEMPLATE = TOOL_CHAT_TEMPLATE.replace(
  `{{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}`,
  `{{- '\\nΩ' + tool_call.name + '(' }}
            {{- tool_call.arguments | tojson }}
            {{- ')' }}`,
);
/** Llama 2's token "Ω" (ONE_TOKEN_CALL_TEMPLATE's call prefix). */
export const CALL_TOKEN = 30357;

/**
 * A copy of the GGUF file `source` with `tokenizer.chat_template` set to `template`, as model
 * `id` (`<org>/<name>`) of a fresh model directory under os.tmpdir().
 */
export async function modelWithChatTemplate(opts: {
  source: string;
  id: string;
  template?: string;
  /** A model directory made before (another model's `dir`), else a new one. */
  dir?: string;
}): Promise<TemplateModel> {
  const dir = opts.dir ?? (await mkdtemp(join(tmpdir(), 'mp-gguf-')));
  const folder = join(dir, ...opts.id.split('/'));
  await mkdir(folder, { recursive: true });
  const copy = withStringMetadata(await readFile(opts.source), {
    'tokenizer.chat_template': opts.template ?? TOOL_CHAT_TEMPLATE,
  });
  await writeFile(join(folder, 'model.gguf'), copy);
  return { dir, id: opts.id, remove: () => rm(dir, { recursive: true, force: true }) };
}
