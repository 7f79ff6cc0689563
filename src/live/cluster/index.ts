// Several nodes (spec/API.md section D): viewers on any API node are served the ladders live
// on another, fetched from the node holding the stream with the cluster's shared secret.
export { type HolderLookup, LiveHolders } from './holders.ts';
export { INTERNAL_LIVE_PREFIX } from './remote-ladder.ts';
export { type RemoteCut, type RemoteLadders, RemotePlayback, type RemotePlaybackOptions } from './remote-playback.ts';
