// SRT packets (IETF draft-sharabayko-srt, section 3): every packet starts with a 16-byte
// header; its first bit tells a control packet (1) from a data packet (0). The relay routes
// packets and reads no payload, so it needs the header's kind, control type and destination
// socket id, and writes the one control packet it sends itself besides handshakes: shutdown.

/** The header every SRT packet starts with (draft section 3). */
export const HEADER_BYTES = 16;

/**
 * The longest datagram an SRT peer sends: its MSS (1500 by default, the most libsrt accepts)
 * less the IP and UDP headers. A longer one is no SRT packet.
 */
export const MAX_PACKET_BYTES = 1500;

/** Control types (draft section 3.2). */
export const ControlType = {
  handshake: 0x0000,
  keepalive: 0x0001,
  ack: 0x0002,
  nak: 0x0003,
  shutdown: 0x0005,
  ackack: 0x0006,
} as const;

export interface PacketHeader {
  control: boolean;
  /** A control packet's type (ControlType); undefined for a data packet. */
  controlType?: number;
  timestamp: number;
  destinationSocketId: number;
}

/** The header of a datagram; undefined when it is too short to hold one. */
export function readHeader(packet: Buffer): PacketHeader | undefined {
  if (packet.length < HEADER_BYTES) return undefined;
  const first = packet.readUInt32BE(0);
  const control = first >>> 31 === 1;
  return {
    control,
    ...(control ? { controlType: (first >>> 16) & 0x7fff } : {}),
    timestamp: packet.readUInt32BE(8),
    destinationSocketId: packet.readUInt32BE(12),
  };
}

/** Whether a datagram is a control packet of `type`. */
export function isControl(packet: Buffer, type: number): boolean {
  const header = readHeader(packet);
  return header?.controlType === type;
}

/** Writes a control packet's header (subtype 0) into the first 16 bytes of `packet`. */
export function writeControlHeader(
  packet: Buffer,
  o: { type: number; typeSpecific?: number; timestamp: number; destinationSocketId: number },
): void {
  packet.writeUInt32BE((0x8000 | o.type) * 0x10000, 0);
  packet.writeUInt32BE(o.typeSpecific ?? 0, 4);
  packet.writeUInt32BE(o.timestamp >>> 0, 8);
  packet.writeUInt32BE(o.destinationSocketId >>> 0, 12);
}

/** A shutdown (draft section 3.2.6): its control information field is one unused 32-bit word, as libsrt sends it. */
export function shutdownPacket(o: { timestamp: number; destinationSocketId: number }): Buffer {
  const packet = Buffer.alloc(HEADER_BYTES + 4);
  writeControlHeader(packet, { type: ControlType.shutdown, ...o });
  return packet;
}

/** A copy of a packet with its header's timestamp replaced. */
export function withTimestamp(packet: Buffer, timestamp: number): Buffer {
  const copy = Buffer.from(packet);
  copy.writeUInt32BE(packetTimestamp(timestamp), 8);
  return copy;
}

/** A packet timestamp (draft section 3: microseconds, 32 bits, wrapping) from a microsecond clock. */
export function packetTimestamp(micros: number): number {
  return Math.floor(micros) % 2 ** 32;
}
