// What travels between a gateway and an orchestrator besides the bodies: the request id header
// and the allowance for a re-serialised body.

/** The header a gateway sends with the id it wants on every chunk (so chunks relay verbatim). */
export const REQUEST_ID_HEADER = 'x-mediaplane-request-id';

/**
 * The most a gateway's forwarded chat body may exceed the body it accepted. The gateway sends
 * its validated request, re-serialised: `stream` and `max_tokens` are always written, a `stop`
 * string becomes an array, and a number may be written out longer (`9e15` as 16 digits, at
 * most 24 characters for each of the seven numeric fields); strings of valid UTF-8 never grow.
 * An orchestrator accepts this much over its MEDIAPLANE_BODY_LIMIT_BYTES, so a body a gateway
 * with the same limit accepted is not refused as too large on its way (issue #15). Since issue
 * #17 a few bodies can grow by more (`"content":""` written for each assistant message without
 * content, numbers inside tool parameters or a JSON schema written out): the gateway refuses
 * those itself as too large (gateway/complete.ts forwardBody), never an orchestrator.
 */
export const FORWARD_OVERHEAD_BYTES = 1024;

/** The chat body an orchestrator accepts from a gateway whose clients may send `bodyLimitBytes`. */
export function forwardedBodyLimit(bodyLimitBytes: number): number {
  return bodyLimitBytes + FORWARD_OVERHEAD_BYTES;
}
