// The grammar itself: node-llama-cpp's GBNF for a schema, with the rules that allow text the
// schema does not replaced, and the tokens banned while a grammar is on.

import { setImmediate as nextTurn } from 'node:timers/promises';
import type { GbnfJsonSchema, Llama, LlamaGrammar, LlamaModel, Token } from 'node-llama-cpp';
import { InternalError } from '../../../../../lib/errors.ts';
import { KEY_DEF } from './gbnf-schema.ts';

/** Rules of node-llama-cpp 3.21's JSON grammar replaced (see json-schema/index.ts), each checked to be what was patched. */
const RULE_PATCHES: Array<{ rule: string; from: string; to: (keyCap: number) => string }> = [
  {
    // One \u escape is one character: escapes of surrogates (two for one character) are left out.
    rule: 'string-char-rule',
    from: String.raw`[^"\\\x7F\x00-\x1F] | "\\" ["\\/bfnrt] | "\\u" [0-9a-fA-F]{4}`,
    to: () =>
      String.raw`[^"\\\x7F\x00-\x1F] | "\\" ["\\/bfnrt] | "\\u" ([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2})`,
  },
  {
    // Used only by the keys of open objects (every string value has a maxLength here).
    rule: 'string-rule',
    from: String.raw`"\"" string-char-rule* "\""`,
    to: (k) => (k === 0 ? String.raw`"\"\""` : String.raw`"\"" ( string-char-rule ){0,${k}} "\""`),
  },
  {
    // 1e-5 is no integer; 15 digits keep within the safe integers.
    rule: 'integer-number-rule',
    from: '"-"? ("0" | [1-9] [0-9]{0,15}) ([eE] [-+]? ("0" | [1-9] [0-9]{0,15}))?',
    to: () => '"-"? ("0" | [1-9] [0-9]{0,14})',
  },
  {
    // An exponent of 16 digits overflows to Infinity, which JSON cannot hold.
    rule: 'fractional-number-rule',
    from: '"-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? ("0" | [1-9] [0-9]{0,15}))?',
    to: () => '"-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?',
  },
];

/** Any day 01-31 of any month: only days each month has (February to the 28th, so leap years need no rule). */
const DATE_FROM = '[0-9]{4} "-" ("0" [1-9] | "1" [012]) "-" ("0" [1-9] | [12] [0-9] | "3" [01])';

const DATE_TO =
  '[0-9]{4} "-" (("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02-" ("0" [1-9] | "1" [0-9] | "2" [0-8]))';

const DATE_RULES = ['string-format-date-rule', 'string-format-date-time-rule'];

/**
 * node-llama-cpp's GBNF for a schema of responseFormatSchema or toolCallSchema with its rules
 * that allow text the schema does not (see json-schema/index.ts) replaced. A rule that is not
 * what was patched (another node-llama-cpp version) is an error, never a silent pass.
 */
export function patchGrammar(gbnf: string, schema: GbnfJsonSchema): string {
  const keyCap = (schema as { $defs?: Record<string, { maxLength?: number }> }).$defs?.[KEY_DEF]?.maxLength;
  return gbnf
    .split('\n')
    .map((line) => {
      const sep = line.indexOf(' ::= ');
      const rule = line.slice(0, sep);
      const body = line.slice(sep + 5);
      const patch = RULE_PATCHES.find((p) => p.rule === rule);
      if (patch) {
        if (body !== patch.from) throw new InternalError(`node-llama-cpp's ${rule} is not the one patched: ${body}`);
        if (rule === 'string-rule' && keyCap === undefined)
          throw new InternalError('patchGrammar: the schema did not come from responseFormatSchema or toolCallSchema');
        return `${rule} ::= ${patch.to(keyCap ?? 0)}`;
      }
      if (DATE_RULES.includes(rule)) {
        if (!body.includes(DATE_FROM))
          throw new InternalError(`node-llama-cpp's ${rule} is not the one patched: ${body}`);
        return `${rule} ::= ${body.replace(DATE_FROM, DATE_TO)}`;
      }
      return line;
    })
    .join('\n');
}

/**
 * The grammar to generate with (LlamaChat's `grammar`): node-llama-cpp's for `schema`, patched,
 * with its stop trigger and whitespace trimming. `schema` from responseFormatSchema or toolCallSchema.
 *
 * Each step is synchronous: node-llama-cpp writing the GBNF and llama.cpp parsing it (once inside
 * createGrammarForJsonSchema, once patched). At the limits (2,000 strings of 59 characters)
 * each took 12-21 ms; before them (5,000 strings of 180) ~100 ms, and back to back with the
 * schema's conversion ~250 ms. So each starts on a turn of its own, with the I/O of other
 * requests between them (issue #25: no request holds the loop for more than 200 ms).
 */
export async function createJsonGrammar(llama: Llama, schema: GbnfJsonSchema): Promise<LlamaGrammar> {
  await nextTurn();
  const base = await llama.createGrammarForJsonSchema<GbnfJsonSchema, Record<string, GbnfJsonSchema>>(schema);
  await nextTurn();
  return llama.createGrammar({
    grammar: patchGrammar(base.grammar, schema),
    stopGenerationTriggers: base.stopGenerationTriggers,
    trimWhitespaceSuffix: base.trimWhitespaceSuffix,
  });
}

const outsideUtf8 = new WeakMap<LlamaModel, readonly Token[]>();

/**
 * The tokens whose text is not whole UTF-8 on its own: the byte tokens 0x80-0xFF of a
 * SentencePiece vocabulary, the pieces of characters of a byte-level BPE one. llama.cpp's grammar
 * decodes UTF-8 leniently (llama-grammar.cpp decode_utf8 checks only that continuation bytes
 * look like ones): overlong forms, surrogates and code points above U+10FFFF pass as characters,
 * so a random model wrote the bytes F9 86 83 BB as one character of a string with maxLength 5,
 * which decodes to four U+FFFD; an overlong C0 A2 even passes as a closing quote. Banned while a
 * grammar is on (the token bias `never`), every token is whole UTF-8 and so is any sequence of
 * them; a character the vocabulary has no whole token for can still be written as a \u escape.
 * Computed once per model (one detokenize per token: ~30 ms for 32,000).
 */
export function tokensOutsideUtf8(model: LlamaModel): readonly Token[] {
  const known = outsideUtf8.get(model);
  if (known) return known;
  const tokens: Token[] = [];
  for (const token of model.iterateAllTokens()) if (model.detokenize([token]).includes('\uFFFD')) tokens.push(token);
  outsideUtf8.set(model, tokens);
  return tokens;
}
