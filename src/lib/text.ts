// What every string a client sends must be (issue #15, spec/API.md: "Every string field
// refuses control characters (NUL included)"). PostgreSQL's jsonb cannot hold U+0000
// (22P05) nor a lone surrogate, so either made the task insert fail with a 500; control
// characters also forge lines in logs and terminals. No field of the API needs a tab or a
// newline: URLs, paths, names, ids and base64 proofs are single-line text.

// Unicode Cc: the C0 controls (NUL, TAB, LF, CR...), DEL and the C1 controls; Cs: a lone
// surrogate, which has no UTF-8 form. Same classes and words as lib/object-path.ts.
const CONTROL = /\p{Cc}/u;
const LONE_SURROGATE = /\p{Cs}/u;

/** What is wrong with a string as text a client may send (`must not ...`), or null. */
export function plainTextProblem(s: string): string | null {
  if (CONTROL.test(s)) return 'must not contain control characters (U+0000 to U+001F, U+007F to U+009F)';
  if (LONE_SURROGATE.test(s)) return 'must be valid Unicode (it holds a lone surrogate)';
  return null;
}
