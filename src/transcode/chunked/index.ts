export { createChunkedHandlers } from './handlers.ts';
export { removeEndedPieces } from './leftovers.ts';
export { PIECE_TYPES, piecesPrefix, type ChunkedDeps, type PieceManifest } from './types.ts';
