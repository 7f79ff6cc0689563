import { type Amf0Object, Amf0Reader, type Amf0Value, encodeAmf0 } from '../amf0.ts';
import { RtmpProtocolError } from './errors.ts';

// RTMP messages (Adobe's RTMP specification, sections 5.4, 6.2 and 7): protocol control
// messages, user control events, AMF0 commands and the media they carry.

export interface RtmpMessage {
  chunkStreamId: number;
  timestamp: number;
  typeId: number;
  /** The message stream id (0: the connection; createStream hands out the others). */
  streamId: number;
  payload: Buffer;
}

export const MessageType = {
  SetChunkSize: 1,
  Abort: 2,
  Acknowledgement: 3,
  UserControl: 4,
  WindowAckSize: 5,
  SetPeerBandwidth: 6,
  Audio: 8,
  Video: 9,
  DataAmf3: 15,
  CommandAmf3: 17,
  DataAmf0: 18,
  CommandAmf0: 20,
} as const;

/** User control event types (section 7.1.7). */
export const UserControlEvent = { StreamBegin: 0, SetBufferLength: 3, PingRequest: 6, PingResponse: 7 } as const;

// Chunk streams of what the server sends: 2 for protocol control (section 5.4), 3 for the
// connection's commands, 5 for a stream's status (the ids ffmpeg and FMS use).
const CONTROL_CSID = 2;
const COMMAND_CSID = 3;
const STATUS_CSID = 5;

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
}

function control(typeId: number, payload: Buffer): RtmpMessage {
  return { chunkStreamId: CONTROL_CSID, timestamp: 0, typeId, streamId: 0, payload };
}

export const setChunkSize = (size: number): RtmpMessage => control(MessageType.SetChunkSize, u32(size));
export const windowAckSize = (size: number): RtmpMessage => control(MessageType.WindowAckSize, u32(size));
export const acknowledgement = (received: number): RtmpMessage => control(MessageType.Acknowledgement, u32(received));
/** Limit type 2, dynamic (section 5.4.5). */
export const setPeerBandwidth = (size: number): RtmpMessage =>
  control(MessageType.SetPeerBandwidth, Buffer.concat([u32(size), Buffer.of(2)]));

export function userControl(event: number, value: number): RtmpMessage {
  const payload = Buffer.alloc(6);
  payload.writeUInt16BE(event);
  payload.writeUInt32BE(value >>> 0, 2);
  return control(MessageType.UserControl, payload);
}

/** An AMF0 command: name, transaction id, command object, arguments (section 7.1.1). */
export function command(o: {
  name: string;
  transactionId: number;
  object?: Amf0Value;
  args?: Amf0Value[];
  streamId?: number;
}): RtmpMessage {
  const streamId = o.streamId ?? 0;
  return {
    chunkStreamId: streamId === 0 ? COMMAND_CSID : STATUS_CSID,
    timestamp: 0,
    typeId: MessageType.CommandAmf0,
    streamId,
    payload: encodeAmf0(o.name, o.transactionId, o.object ?? null, ...(o.args ?? [])),
  };
}

/** NetStream's onStatus (section 7.2.2): what a publisher is told of its publish. */
export function onStatus(o: {
  streamId: number;
  level: 'status' | 'error';
  code: string;
  description: string;
}): RtmpMessage {
  const info: Amf0Object = { level: o.level, code: o.code, description: o.description };
  return command({ name: 'onStatus', transactionId: 0, args: [info], streamId: o.streamId });
}

export interface RtmpCommand {
  name: string;
  transactionId: number;
  object: Amf0Value;
  args: Amf0Value[];
}

/** The values of an AMF0 command, or of an AMF3 one (which starts with one format byte, then AMF0). */
export function readCommand(message: RtmpMessage): RtmpCommand {
  const bytes = message.typeId === MessageType.CommandAmf3 ? message.payload.subarray(1) : message.payload;
  const [name, transactionId, object = null, ...args] = new Amf0Reader(bytes).readAll();
  if (typeof name !== 'string') throw new RtmpProtocolError('a command without a name');
  return { name, transactionId: typeof transactionId === 'number' ? transactionId : 0, object, args };
}

/** A four-byte protocol control value (acknowledgement window, user control event). */
export function readUInt32(payload: Buffer, at: number, what: string): number {
  if (payload.length < at + 4) throw new RtmpProtocolError(`a ${what} message of ${payload.length} bytes`);
  return payload.readUInt32BE(at);
}
