// Low-latency HLS (Apple's HLS, RFC 8216bis) packaged in Node from ffmpeg's fragmented MP4:
// one LiveRendition per rendition of a live ladder, and the ladder's multivariant playlist.
export { multivariantPlaylist, type VariantInfo, withUriQuery } from './playlist.ts';
export type { RenditionNumbering } from './names.ts';
export { LiveRendition, type PlaylistRequest } from './rendition.ts';
export type { LlhlsTiming, PlaylistAnswer, RenditionStats, RenditionTap, TappedPart } from './types.ts';
