import { UnsupportedMediaError } from '../../lib/errors.ts';

/** Bytes that break RTMP (a handshake, a chunk, a message): the connection is closed. */
export class RtmpProtocolError extends UnsupportedMediaError {}
