// The ids the service gives out (tasks, webhooks, delivery logs) are UUIDs (crypto.randomUUID).
// Checked before a query, so that a path segment or cursor that is no id of ours is "not found"
// (or ends a list) instead of a database error about its type; written once here (issue #26).

/** A UUID in any case, as a regex source without anchors, for patterns that embed one. */
export const UUID_PATTERN = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';

const UUID_RE = new RegExp(`^${UUID_PATTERN}$`, 'i');

/** Whether `s` is a UUID (any case, nothing around it). */
export function isUuid(s: string): boolean {
  return UUID_RE.test(s);
}
