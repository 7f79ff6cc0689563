// Where things live in the built-in store (issue #27). Media URLs are `/media/<key>`, so the
// first segments of a key also say what the file belongs to (an asset by its playbackId, or
// a transcode task by its id): playback policies (issue #28) are checked by that prefix.

/** Everything of one asset, removed together when it is deleted. */
export const assetPrefix = (playbackId: string): string => `asset/${playbackId}/`;

/** The file as uploaded or fetched (the asset's `downloadUrl`; clip and export read it). */
export const assetSourceKey = (playbackId: string): string => `${assetPrefix(playbackId)}source`;

/** The outputs of a `POST /api/transcode` that named no `storage`, under its task. */
export const taskPrefix = (taskId: string): string => `task/${taskId}/`;
