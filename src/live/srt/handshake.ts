import { ControlType, HEADER_BYTES, readHeader, writeControlHeader } from './packet.ts';

// The SRT handshake (IETF draft-sharabayko-srt, section 3.2.1 and 4.3): a control packet whose
// information field holds 48 bytes of fixed fields, then (HSv5 conclusion) extension blocks.
// A caller connects to a listener in two round trips:
//   --> INDUCTION (version 4, no cookie)      <-- INDUCTION (version 5, SRT magic, a SYN cookie)
//   --> CONCLUSION (the cookie, extensions)   <-- CONCLUSION (accepted) or a rejection
// A rejection is a handshake whose type is 1000 + the reason (libsrt's URQFailure).

/** The fixed fields of a handshake's control information field (draft figure 5). */
export const HANDSHAKE_FIELDS_BYTES = 48;

/** Handshake types (draft section 3.2.1.1), as signed 32-bit values. */
export const HandshakeType = { induction: 1, waveahand: 0, conclusion: -1, agreement: -2 } as const;

/** HSv5: the version a listener answers an induction with, and a HSv5 caller concludes with. */
export const HS_VERSION_5 = 5;
/** What an HSv5 listener puts in the extension field of its induction response (draft 4.3.1.1). */
export const SRT_MAGIC = 0x4a17;
/** An induction request's extension field: UDT's socket type DGRAM (draft 4.3.1.1). */
const UDT_DGRAM = 2;

/** Flags of a conclusion's extension field (draft section 3.2.1). */
export const ExtensionFlag = { hsreq: 0x1, kmreq: 0x2, config: 0x4 } as const;

/** Extension block types (draft section 3.2.1.1, table 5). */
export const ExtensionType = {
  hsreq: 1,
  hsrsp: 2,
  kmreq: 3,
  kmrsp: 4,
  sid: 5,
  congestion: 6,
  filter: 7,
  group: 8,
} as const;

/**
 * Rejection reasons: below 1000 libsrt's SRT_REJ_* (srt.h), from 1000 the application's, whose
 * 1400-1599 mirror HTTP (libsrt's access_control.h, SRT_REJX_*).
 */
export const RejectReason = {
  resource: 3,
  rogue: 4,
  version: 8,
  unsecure: 11,
  badRequest: 1400,
  overload: 1402,
  forbidden: 1403,
  badMode: 1405,
  unavailable: 1503,
} as const;

/** Handshake types from here on carry a rejection reason (libsrt handshake.h: URQ_FAILURE_TYPES). */
const REJECTION_BASE = 1000;

/** The longest stream id SRT carries (draft section 3.2.1.3: 512 bytes). */
export const MAX_STREAM_ID_BYTES = 512;

export interface HandshakeExtension {
  type: number;
  content: Buffer;
}

export interface Handshake {
  version: number;
  encryption: number;
  extensionField: number;
  initialSequence: number;
  mtu: number;
  flowWindow: number;
  /** HandshakeType, or 1000 + a rejection reason. */
  type: number;
  socketId: number;
  cookie: number;
  /** 16 bytes, as the sender wrote them. */
  peerIp: Buffer;
  extensions: HandshakeExtension[];
}

/** The handshake a datagram carries; undefined when it is no handshake or is cut short. */
export function parseHandshake(packet: Buffer): Handshake | undefined {
  if (readHeader(packet)?.controlType !== ControlType.handshake) return undefined;
  if (packet.length < HEADER_BYTES + HANDSHAKE_FIELDS_BYTES) return undefined;
  const at = (i: number): number => HEADER_BYTES + i;
  const extensions = parseExtensions(packet.subarray(at(HANDSHAKE_FIELDS_BYTES)));
  if (!extensions) return undefined;
  return {
    version: packet.readUInt32BE(at(0)),
    encryption: packet.readUInt16BE(at(4)),
    extensionField: packet.readUInt16BE(at(6)),
    initialSequence: packet.readUInt32BE(at(8)),
    mtu: packet.readUInt32BE(at(12)),
    flowWindow: packet.readUInt32BE(at(16)),
    type: packet.readInt32BE(at(20)),
    socketId: packet.readUInt32BE(at(24)),
    cookie: packet.readUInt32BE(at(28)),
    peerIp: Buffer.from(packet.subarray(at(32), at(48))),
    extensions,
  };
}

/** Extension blocks: a 16-bit type, a 16-bit length in 32-bit words, the content; undefined when one overruns. */
function parseExtensions(bytes: Buffer): HandshakeExtension[] | undefined {
  const extensions: HandshakeExtension[] = [];
  let i = 0;
  while (i < bytes.length) {
    if (bytes.length - i < 4) return undefined;
    const type = bytes.readUInt16BE(i);
    const end = i + 4 + bytes.readUInt16BE(i + 2) * 4;
    if (end > bytes.length) return undefined;
    extensions.push({ type, content: Buffer.from(bytes.subarray(i + 4, end)) });
    i = end;
  }
  return extensions;
}

/** A handshake packet: the header (to `destinationSocketId`), the fixed fields, the extensions. */
export function writeHandshake(hs: Handshake, header: { timestamp: number; destinationSocketId: number }): Buffer {
  const extensionBytes = hs.extensions.reduce((n, e) => n + 4 + padded(e.content.length), 0);
  const packet = Buffer.alloc(HEADER_BYTES + HANDSHAKE_FIELDS_BYTES + extensionBytes);
  writeControlHeader(packet, { type: ControlType.handshake, ...header });
  const at = (i: number): number => HEADER_BYTES + i;
  packet.writeUInt32BE(hs.version >>> 0, at(0));
  packet.writeUInt16BE(hs.encryption & 0xffff, at(4));
  packet.writeUInt16BE(hs.extensionField & 0xffff, at(6));
  packet.writeUInt32BE(hs.initialSequence >>> 0, at(8));
  packet.writeUInt32BE(hs.mtu >>> 0, at(12));
  packet.writeUInt32BE(hs.flowWindow >>> 0, at(16));
  packet.writeInt32BE(hs.type | 0, at(20));
  packet.writeUInt32BE(hs.socketId >>> 0, at(24));
  packet.writeUInt32BE(hs.cookie >>> 0, at(28));
  hs.peerIp.copy(packet, at(32), 0, 16);
  let i = at(HANDSHAKE_FIELDS_BYTES);
  for (const e of hs.extensions) {
    packet.writeUInt16BE(e.type, i);
    packet.writeUInt16BE(padded(e.content.length) / 4, i + 2);
    e.content.copy(packet, i + 4);
    i += 4 + padded(e.content.length);
  }
  return packet;
}

const padded = (n: number): number => Math.ceil(n / 4) * 4;

/**
 * A stream id's extension content. libsrt copies the string into 32-bit words and converts
 * each from host (little-endian) to network order, so on the wire the bytes of every word are
 * reversed ("abcd" travels as "dcba"); the last word is padded with zeros (draft 3.2.1.3).
 */
export function encodeStreamId(streamId: string): Buffer {
  const text = Buffer.from(streamId, 'utf8');
  const words = Buffer.alloc(padded(text.length));
  text.copy(words);
  return words.swap32();
}

/** The stream id in a SID extension's content (see encodeStreamId), its zero padding dropped. */
export function decodeStreamId(content: Buffer): string {
  const words = Buffer.from(content.subarray(0, content.length - (content.length % 4))).swap32();
  const end = words.indexOf(0);
  return words.subarray(0, end === -1 ? words.length : end).toString('utf8');
}

/** The stream id a conclusion carries; undefined when it has none (or one over 512 bytes). */
export function streamIdOf(hs: Handshake): string | undefined {
  const sid = hs.extensions.find((e) => e.type === ExtensionType.sid);
  if (!sid || sid.content.length > MAX_STREAM_ID_BYTES) return undefined;
  return decodeStreamId(sid.content);
}

/** Whether a conclusion asks for encryption (a KMREQ: the caller has a passphrase). */
export function asksEncryption(hs: Handshake): boolean {
  return (hs.extensionField & ExtensionFlag.kmreq) !== 0 || hs.extensions.some((e) => e.type === ExtensionType.kmreq);
}

/** The handshake type that rejects with `reason`. */
export function rejectionType(reason: number): number {
  return REJECTION_BASE + reason;
}

/** The reason a rejection handshake carries; undefined for any other handshake. */
export function rejectionReason(hs: Handshake): number | undefined {
  return hs.type >= REJECTION_BASE ? hs.type - REJECTION_BASE : undefined;
}

/**
 * An HSv5 caller's induction (draft 4.3.1.1): version 4, the DGRAM socket type, no cookie.
 * The relay sends it to its remux listener to learn that listener's cookie.
 */
export function inductionRequest(o: { socketId: number; initialSequence: number }): Handshake {
  return {
    version: 4,
    encryption: 0,
    extensionField: UDT_DGRAM,
    initialSequence: o.initialSequence,
    mtu: 1500,
    flowWindow: 8192,
    type: HandshakeType.induction,
    socketId: o.socketId,
    cookie: 0,
    peerIp: loopbackPeerIp(),
    extensions: [],
  };
}

/** 127.0.0.1 as libsrt writes an IPv4 address in the peer IP field: the first 32-bit word, host order. */
function loopbackPeerIp(): Buffer {
  const ip = Buffer.alloc(16);
  ip.writeUInt32LE(0x7f000001, 0);
  return ip;
}

/**
 * A listener's answer to an induction (draft 4.3.1.1): the caller's handshake back, as version
 * 5 with the SRT magic (no encryption advertised) and the listener's cookie.
 */
export function inductionResponse(request: Handshake, cookie: number): Handshake {
  return { ...request, version: HS_VERSION_5, encryption: 0, extensionField: SRT_MAGIC, cookie, extensions: [] };
}

/** A rejection of a conclusion: its fixed fields back with the reason as the type, as libsrt sends one. */
export function rejection(request: Handshake, reason: number): Handshake {
  return { ...request, type: rejectionType(reason), extensions: [] };
}

/** A copy of a handshake packet with the SYN cookie replaced (the relay's replay to its remux listener). */
export function withCookie(packet: Buffer, cookie: number): Buffer {
  const copy = Buffer.from(packet);
  copy.writeUInt32BE(cookie >>> 0, HEADER_BYTES + 28);
  return copy;
}
