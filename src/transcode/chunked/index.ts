export { createChunkedHandlers } from './handlers.ts';
export { removeEndedPieces } from './leftovers.ts';
export { transcodeOrSplit } from './split.ts';
export { PIECE_TYPES, piecesPrefix, type ChunkedDeps, type PieceManifest } from './types.ts';
