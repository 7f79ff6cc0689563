import { UnsupportedMediaError } from '../lib/errors.ts';

// AMF0 (Adobe's "Action Message Format -- AMF 0", 2007): the encoding of RTMP commands
// (connect, createStream, publish, onStatus) and of FLV script data (onMetaData). The bytes
// come from publishers, so every length is checked against what is left and against limits
// before anything is allocated, and nesting is bounded: a malformed value is an Amf0Error,
// never a crash or a huge allocation.

/** An AMF0 object or ECMA array, read as a plain record without a prototype. */
export interface Amf0Object {
  [key: string]: Amf0Value;
}

export type Amf0Value = number | boolean | string | null | undefined | Date | Amf0Object | Amf0Value[] | Amf0EcmaArray;

/** An ECMA array to encode (a record written with marker 0x08, as onMetaData is); decoding gives a plain record. */
export class Amf0EcmaArray {
  readonly entries: Amf0Object;
  constructor(entries: Amf0Object) {
    this.entries = entries;
  }
}

/** Bytes that are not the AMF0 they should be. */
export class Amf0Error extends UnsupportedMediaError {}

export interface Amf0Limits {
  /** Deepest nesting of objects and arrays. */
  maxDepth: number;
  /** Most properties in one object or ECMA array, most items in one strict array. */
  maxEntries: number;
}

export const DEFAULT_AMF0_LIMITS: Amf0Limits = { maxDepth: 16, maxEntries: 4096 };

// Type markers, section 2.1 of the AMF0 specification.
const NUMBER = 0x00;
const BOOLEAN = 0x01;
const STRING = 0x02;
const OBJECT = 0x03;
const NULL = 0x05;
const UNDEFINED = 0x06;
const ECMA_ARRAY = 0x08;
const OBJECT_END = 0x09;
const STRICT_ARRAY = 0x0a;
const DATE = 0x0b;
const LONG_STRING = 0x0c;
const XML_DOCUMENT = 0x0f;
const TYPED_OBJECT = 0x10;

/** Reads AMF0 values one after another from one buffer. */
export class Amf0Reader {
  private readonly buf: Buffer;
  private readonly limits: Amf0Limits;
  private pos = 0;

  constructor(buf: Buffer, limits: Amf0Limits = DEFAULT_AMF0_LIMITS) {
    this.buf = buf;
    this.limits = limits;
  }

  /** Bytes read so far: where the next value starts. */
  get offset(): number {
    return this.pos;
  }

  /** Whether every byte has been read. */
  get done(): boolean {
    return this.pos >= this.buf.length;
  }

  read(): Amf0Value {
    return this.value(0);
  }

  /** Every value left in the buffer. */
  readAll(): Amf0Value[] {
    const out: Amf0Value[] = [];
    while (!this.done) out.push(this.read());
    return out;
  }

  private need(n: number, what: string): void {
    if (this.buf.length - this.pos < n) throw new Amf0Error(`AMF0: ${what} runs past the end of the data`);
  }

  private u8(what: string): number {
    this.need(1, what);
    const v = this.buf.readUInt8(this.pos);
    this.pos += 1;
    return v;
  }

  private u16(what: string): number {
    this.need(2, what);
    const v = this.buf.readUInt16BE(this.pos);
    this.pos += 2;
    return v;
  }

  private u32(what: string): number {
    this.need(4, what);
    const v = this.buf.readUInt32BE(this.pos);
    this.pos += 4;
    return v;
  }

  private f64(what: string): number {
    this.need(8, what);
    const v = this.buf.readDoubleBE(this.pos);
    this.pos += 8;
    return v;
  }

  private utf8(length: number, what: string): string {
    this.need(length, what);
    const s = this.buf.toString('utf8', this.pos, this.pos + length);
    this.pos += length;
    return s;
  }

  private value(depth: number): Amf0Value {
    const marker = this.u8('a type marker');
    switch (marker) {
      case NUMBER:
        return this.f64('a number');
      case BOOLEAN:
        return this.u8('a boolean') !== 0;
      case STRING:
        return this.utf8(this.u16('a string length'), 'a string');
      case LONG_STRING:
      case XML_DOCUMENT:
        return this.utf8(this.u32('a long string length'), 'a long string');
      case NULL:
        return null;
      case UNDEFINED:
        return undefined;
      case DATE:
        return this.date();
      case OBJECT:
        return this.properties(depth + 1);
      case TYPED_OBJECT:
        this.utf8(this.u16('a class name length'), 'a class name');
        return this.properties(depth + 1);
      case ECMA_ARRAY:
        // The count is a hint only (encoders get it wrong); the object end marker ends it.
        this.u32('an ECMA array count');
        return this.properties(depth + 1);
      case STRICT_ARRAY:
        return this.strictArray(depth + 1);
      case OBJECT_END:
        throw new Amf0Error('AMF0: an object end marker outside an object');
      default:
        throw new Amf0Error(`AMF0: unsupported type marker 0x${marker.toString(16).padStart(2, '0')}`);
    }
  }

  private date(): Date {
    const ms = this.f64('a date');
    this.u16('a date time zone'); // reserved, "should be set to 0x0000" (section 2.13)
    return new Date(ms);
  }

  private checkDepth(depth: number): void {
    if (depth > this.limits.maxDepth) throw new Amf0Error(`AMF0: nested deeper than ${this.limits.maxDepth} levels`);
  }

  private properties(depth: number): Amf0Object {
    this.checkDepth(depth);
    const out: Amf0Object = Object.create(null);
    for (let count = 0; ; count++) {
      const key = this.utf8(this.u16('a property name length'), 'a property name');
      if (key === '' && this.buf[this.pos] === OBJECT_END) {
        this.pos += 1;
        return out;
      }
      if (count >= this.limits.maxEntries)
        throw new Amf0Error(`AMF0: an object with more than ${this.limits.maxEntries} properties`);
      out[key] = this.value(depth);
    }
  }

  private strictArray(depth: number): Amf0Value[] {
    this.checkDepth(depth);
    const count = this.u32('a strict array count');
    // Every value takes at least its marker byte: a count past the bytes left is a lie.
    if (count > this.limits.maxEntries || count > this.buf.length - this.pos)
      throw new Amf0Error(`AMF0: a strict array of ${count} items does not fit`);
    const out: Amf0Value[] = [];
    for (let i = 0; i < count; i++) out.push(this.value(depth));
    return out;
  }
}

/** Every AMF0 value in `buf`, in order. Throws Amf0Error on malformed bytes. */
export function decodeAmf0(buf: Buffer, limits: Amf0Limits = DEFAULT_AMF0_LIMITS): Amf0Value[] {
  return new Amf0Reader(buf, limits).readAll();
}

/** The AMF0 bytes of the values, one after another. */
export function encodeAmf0(...values: Amf0Value[]): Buffer {
  const parts: Buffer[] = [];
  for (const v of values) encodeValue(v, parts, 0);
  return Buffer.concat(parts);
}

const marker = (m: number): Buffer => Buffer.of(m);

function u16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

function f64(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeDoubleBE(n);
  return b;
}

function encodeString(s: string, parts: Buffer[]): void {
  const bytes = Buffer.from(s, 'utf8');
  if (bytes.length > 0xffff) parts.push(marker(LONG_STRING), u32(bytes.length), bytes);
  else parts.push(marker(STRING), u16(bytes.length), bytes);
}

/** Property list, then the empty name and the object end marker. */
function encodeProperties(o: Amf0Object, parts: Buffer[], depth: number): void {
  for (const [key, v] of Object.entries(o)) {
    const name = Buffer.from(key, 'utf8');
    if (name.length > 0xffff) throw new Amf0Error('AMF0: a property name longer than 65535 bytes');
    parts.push(u16(name.length), name);
    encodeValue(v, parts, depth + 1);
  }
  parts.push(Buffer.of(0, 0, OBJECT_END));
}

function encodeValue(v: Amf0Value, parts: Buffer[], depth: number): void {
  if (depth > DEFAULT_AMF0_LIMITS.maxDepth) throw new Amf0Error('AMF0: a value nested too deep to encode');
  if (v === undefined) parts.push(marker(UNDEFINED));
  else if (v === null) parts.push(marker(NULL));
  else if (typeof v === 'number') parts.push(marker(NUMBER), f64(v));
  else if (typeof v === 'boolean') parts.push(marker(BOOLEAN), Buffer.of(v ? 1 : 0));
  else if (typeof v === 'string') encodeString(v, parts);
  else if (v instanceof Date) parts.push(marker(DATE), f64(v.getTime()), u16(0));
  else if (Array.isArray(v)) {
    parts.push(marker(STRICT_ARRAY), u32(v.length));
    for (const item of v) encodeValue(item, parts, depth + 1);
  } else if (v instanceof Amf0EcmaArray) {
    parts.push(marker(ECMA_ARRAY), u32(Object.keys(v.entries).length));
    encodeProperties(v.entries, parts, depth);
  } else {
    parts.push(marker(OBJECT));
    encodeProperties(v, parts, depth);
  }
}
