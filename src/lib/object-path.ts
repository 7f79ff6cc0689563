import { StorageDeniedError } from './errors.ts';
import { plainTextProblem } from './text.ts';

// The one rule for object paths and keys (issue #15, spec/API.md "Output path rules"): the
// API refuses a bad `outputs.*.path` or `input.path` with a 422, and every store asserts it
// again on each key it builds (defence in depth: a key with `..` is refused even if the
// validation were bypassed, e.g. a task queued before the rule existed). `..` and `.` are
// plain characters to S3, but some S3-protocol servers and proxies resolve them (or their
// percent-encoded forms, or a backslash read as a separator) and write outside the bucket;
// the dweb and local stores write keys to disk, where they would leave the folder.

/** S3's largest key (bytes of UTF-8), used for every store so a path works on all of them. */
export const MAX_OBJECT_PATH_BYTES = 1024;
/** A segment becomes a file or folder name on disk (dweb staging, local output): NAME_MAX. */
const MAX_SEGMENT_BYTES = 255;

export interface ObjectPathShape {
  /**
   * A folder that keys are built under (`outputs.*.path`): it may end with one `/`, which
   * names the same folder (`/out/hls/` and `/out/hls` give the same keys), and `/` alone is
   * the bucket's root. Otherwise the path names one object and ends with a name.
   */
  folder?: boolean;
}

/** What is wrong with a path, as a rule a client can read (`must not ...`), or null. */
export function objectPathProblem(path: string, shape: ObjectPathShape = {}): string | null {
  const bytes = Buffer.byteLength(path, 'utf8');
  if (bytes > MAX_OBJECT_PATH_BYTES)
    return `must be at most ${MAX_OBJECT_PATH_BYTES} bytes in UTF-8 (this one is ${bytes})`;
  // Control characters and lone surrogates (no UTF-8 form: a store would write U+FFFD, another
  // name than the one asked): checked here too, so the rule holds for a key no API checked.
  const text = plainTextProblem(path);
  if (text) return text;
  if (path.includes('\\')) return 'must not contain a backslash (\\): paths are /-separated';
  if (path.includes('?') || path.includes('#')) return 'must not contain ? or #';
  // Every % is refused, not only %2e/%2f/%5c: a server that decodes once may meet %252e
  // and decode again, and IIS-style %u002e is no %XX at all.
  if (path.includes('%')) return 'must not contain % (percent-encoded characters such as %2e are refused)';
  return segmentsProblem(path, shape);
}

function segmentsProblem(path: string, shape: ObjectPathShape): string | null {
  let rest = path.startsWith('/') ? path.slice(1) : path;
  if (shape.folder && rest === '') return null;
  if (shape.folder && rest.endsWith('/')) rest = rest.slice(0, -1);
  const segments = rest.split('/');
  const last = segments.length - 1;
  if (segments.some((s) => s === '.' || s === '..')) return 'must not contain . or .. segments';
  if (segments.some((s, i) => s === '' && (i < last || shape.folder))) return 'must not contain empty segments (//)';
  if (segments[last] === '') return 'must name an object (a path that ends with a name, not with /)';
  if (segments.some((s) => Buffer.byteLength(s, 'utf8') > MAX_SEGMENT_BYTES))
    return `must not have a segment over ${MAX_SEGMENT_BYTES} bytes`;
  return null;
}

/**
 * The key a store writes, checked again against the path rule: without its leading `/`,
 * or a StorageDeniedError (never retried: the same key would be refused again). The
 * message says what is wrong, not the key (it may hold control characters).
 */
export function checkedObjectKey(key: string): string {
  const problem = objectPathProblem(key);
  if (problem) throw new StorageDeniedError(`storage key refused: the key ${problem}`);
  return key.startsWith('/') ? key.slice(1) : key;
}
