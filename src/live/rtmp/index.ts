// RTMP ingest: our own server (handshake, chunk streams, AMF0 commands) that hands each publish
// to the live runtime's gate and writes an accepted publisher's media as FLV.
export { DEFAULT_CHUNK_LIMITS, type ChunkReaderLimits } from './chunk-reader.ts';
export { type RtmpServerOptions, startRtmpServer } from './server.ts';
