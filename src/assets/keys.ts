// Where an asset's files live in the built-in store (issue #27). Media URLs are `/media/<key>`,
// so the first segments of a key say what the file belongs to (an asset by its playbackId;
// a transcode task's outputs are under `task/<id>/`, transcode/handler.ts): playback policies
// (issue #28) are checked by that prefix.

/** Everything of one asset, removed together when it is deleted. */
export const assetPrefix = (playbackId: string): string => `asset/${playbackId}/`;

/** The file as uploaded or fetched (the asset's `downloadUrl`; clip and export read it). */
export const assetSourceKey = (playbackId: string): string => `${assetPrefix(playbackId)}source`;

/** The folder of the asset's HLS tree (processing.ts assetOutputs writes it there). */
export const ASSET_HLS_FOLDER = 'hls';

/**
 * The asset's HLS master playlist (its `playbackUrl`): the early EVENT playlists of a split
 * run are written here as the first pieces finish, and the final VOD ones at the end.
 */
export const assetPlaylistKey = (playbackId: string): string =>
  `${assetPrefix(playbackId)}${ASSET_HLS_FOLDER}/index.m3u8`;
