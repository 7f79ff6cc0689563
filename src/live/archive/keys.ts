// Where a live session's archived source lives in the built-in store. Parts are grouped by
// the wall-clock minute of their first sample, so the retention sweep drops whole minutes
// with one removePrefix (a folder store removes one directory, a bucket lists one prefix).

const MINUTE_MS = 60_000;

/** Everything archived of one session. */
export const archiveSessionPrefix = (sessionId: string): string => `live/${sessionId}/`;

/** The init segment of run `run` (one packager run: the ladder's start, a restart, a reconnect). */
export const archiveInitKey = (sessionId: string, run: number): string =>
  `${archiveSessionPrefix(sessionId)}init/${run}.mp4`;

/** The wall-clock minute a part starting at `wallMs` is filed under. */
export const wallMinute = (wallMs: number): number => Math.floor(wallMs / MINUTE_MS);

/** Every part whose first sample is in wall-clock minute `minute`. */
export const archiveMinutePrefix = (sessionId: string, minute: number): string =>
  `${archiveSessionPrefix(sessionId)}m${minute}/`;

/** One part (a moof+mdat as the packager cut it). */
export const archivePartKey = (
  sessionId: string,
  p: { run: number; msn: number; part: number; wallStartMs: number },
): string => `${archiveMinutePrefix(sessionId, wallMinute(p.wallStartMs))}${p.run}-${p.msn}-${p.part}.m4s`;

/** The first wall-clock ms of `minute`. */
export const minuteStartMs = (minute: number): number => minute * MINUTE_MS;
