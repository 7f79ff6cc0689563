// SRT ingest: a UDP relay that checks a publisher's stream id before any process starts, then
// forwards the publish to one remux ffmpeg that turns it into FLV for the live runtime.
export { type SrtRelay, type SrtRelayOptions, startSrtRelay } from './relay.ts';
