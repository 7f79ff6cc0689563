// The sample tables of one track of a non-fragmented MP4 (ISO/IEC 14496-12, 8.6-8.7 and
// 8.9), read into one entry per sample, and written back run-length coded for a track joined
// from several parts (outputs/mp4-join.ts). Per sample: its size, where its bytes lie in its
// file, its decode duration, its composition offset, whether it is a sync sample and its
// sample groups. A two-hour film's video is some 200,000 samples: a few megabytes here.

import { InternalError } from '../../lib/errors.ts';
import { child, childBoxes, fullBoxHeader, type BoxView } from '../mp4-boxes.ts';

/** One track's samples, in decode order. */
export interface SampleTable {
  sizes: Uint32Array;
  /** Where each sample's bytes start in its file. */
  offsets: Float64Array;
  durations: Uint32Array;
  /** Composition offsets; undefined when the track has none (every one 0). */
  cts: Int32Array | undefined;
  /** 1 for a sync sample; undefined when every sample is one (no stss). */
  sync: Uint8Array | undefined;
  /** Per grouping type (sbgp), each sample's group_description_index (0: none). */
  groups: Map<string, Uint32Array>;
  /** Each sample's dependency flags (sdtp, one byte each: x265 writes them); undefined without. */
  dependencies: Uint8Array | undefined;
}

/** The stbl children the join rebuilds or copies; any other box stops it rather than be lost. */
export const KNOWN_STBL = new Set([
  'stsd',
  'stts',
  'ctts',
  'stss',
  'stsz',
  'stz2',
  'stsc',
  'stco',
  'co64',
  'sgpd',
  'sbgp',
  'sdtp',
]);

const fail = (what: string): never => {
  throw new InternalError(`mp4 join: ${what}`);
};

/** Entries of a full box whose payload is entry_count then fixed-size entries. */
function entries(buf: Buffer, box: BoxView | undefined, width: number): { at: number; count: number } {
  if (!box) return { at: 0, count: 0 };
  const count = buf.readUInt32BE(box.start + 4);
  if (box.start + 8 + count * width > box.end) fail(`a ${box.type} box shorter than its entries`);
  return { at: box.start + 8, count };
}

/** Run-length entries (count, value) expanded to one value per sample. */
function expandRuns(
  buf: Buffer,
  box: BoxView,
  n: number,
  read: (at: number) => number,
): { values: number[]; filled: number } {
  const { at, count } = entries(buf, box, 8);
  const values: number[] = [];
  for (let e = 0; e < count && values.length < n; e++) {
    const runs = buf.readUInt32BE(at + e * 8);
    const v = read(at + e * 8 + 4);
    for (let k = 0; k < runs && values.length < n; k++) values.push(v);
  }
  return { values, filled: values.length };
}

function sampleSizes(buf: Buffer, stbl: BoxView): Uint32Array {
  const stsz = child(buf, stbl, 'stsz');
  if (!stsz) return fail(child(buf, stbl, 'stz2') ? 'compact sample sizes (stz2) are not supported' : 'no stsz box');
  const constant = buf.readUInt32BE(stsz.start + 4);
  const n = buf.readUInt32BE(stsz.start + 8);
  if (constant !== 0) return new Uint32Array(n).fill(constant);
  if (stsz.start + 12 + n * 4 > stsz.end) fail('a stsz box shorter than its entries');
  const sizes = new Uint32Array(n);
  for (let i = 0; i < n; i++) sizes[i] = buf.readUInt32BE(stsz.start + 12 + i * 4);
  return sizes;
}

/** Each sample's file offset, from the chunks (stco/co64) and the samples per chunk (stsc). */
function sampleOffsets(buf: Buffer, stbl: BoxView, sizes: Uint32Array): Float64Array {
  const stco = child(buf, stbl, 'stco');
  const co64 = child(buf, stbl, 'co64');
  const chunks = entries(buf, stco ?? co64, stco ? 4 : 8);
  const chunkAt = (c: number): number =>
    stco ? buf.readUInt32BE(chunks.at + c * 4) : Number(buf.readBigUInt64BE(chunks.at + c * 8));
  const stsc = entries(buf, child(buf, stbl, 'stsc'), 12);
  const offsets = new Float64Array(sizes.length);
  let s = 0;
  for (let e = 0; e < stsc.count; e++) {
    const first = buf.readUInt32BE(stsc.at + e * 12) - 1;
    const perChunk = buf.readUInt32BE(stsc.at + e * 12 + 4);
    const end = e + 1 < stsc.count ? buf.readUInt32BE(stsc.at + (e + 1) * 12) - 1 : chunks.count;
    for (let c = first; c < end; c++) {
      let at = chunkAt(c);
      for (let k = 0; k < perChunk && s < sizes.length; k++, s++) {
        offsets[s] = at;
        at += sizes[s] ?? 0;
      }
    }
  }
  if (s !== sizes.length) fail(`the chunks hold ${s} of ${sizes.length} samples`);
  return offsets;
}

function syncSamples(buf: Buffer, stbl: BoxView, n: number): Uint8Array | undefined {
  const stss = child(buf, stbl, 'stss');
  if (!stss) return undefined;
  const { at, count } = entries(buf, stss, 4);
  const sync = new Uint8Array(n);
  for (let e = 0; e < count; e++) sync[buf.readUInt32BE(at + e * 4) - 1] = 1;
  return sync;
}

/** sbgp (version 0: no grouping_type_parameter): each sample's group description index. */
function sampleGroups(buf: Buffer, stbl: BoxView, n: number): Map<string, Uint32Array> {
  const groups = new Map<string, Uint32Array>();
  for (const sbgp of childBoxes(buf, stbl.start, stbl.end).filter((b) => b.type === 'sbgp')) {
    if (fullBoxHeader(buf, sbgp).version !== 0) fail('sample groups with a parameter (sbgp version 1)');
    const type = buf.toString('latin1', sbgp.start + 4, sbgp.start + 8);
    const values = expandRuns(buf, { ...sbgp, start: sbgp.start + 4 }, n, (at) => buf.readUInt32BE(at));
    groups.set(
      type,
      Uint32Array.from({ length: n }, (_, i) => values.values[i] ?? 0),
    );
  }
  return groups;
}

/** The sample table of a track (its stbl box in `buf`). */
export function readSampleTable(buf: Buffer, stbl: BoxView): SampleTable {
  for (const b of childBoxes(buf, stbl.start, stbl.end))
    if (!KNOWN_STBL.has(b.type)) fail(`a part has a ${b.type} box, which the join does not carry`);
  const sizes = sampleSizes(buf, stbl);
  const n = sizes.length;
  const stts = child(buf, stbl, 'stts') ?? fail('no stts box');
  const durations = expandRuns(buf, stts, n, (at) => buf.readUInt32BE(at));
  if (durations.filled !== n) fail(`stts gives ${durations.filled} of ${n} samples their duration`);
  const ctts = child(buf, stbl, 'ctts');
  // Composition offsets are unsigned in version 0 and signed in version 1 (8.6.1.3).
  const signed = ctts && fullBoxHeader(buf, ctts).version === 1;
  const sdtp = child(buf, stbl, 'sdtp');
  const cts = ctts && expandRuns(buf, ctts, n, (at) => (signed ? buf.readInt32BE(at) : buf.readUInt32BE(at)));
  return {
    sizes,
    offsets: sampleOffsets(buf, stbl, sizes),
    durations: Uint32Array.from(durations.values),
    cts: cts ? Int32Array.from({ length: n }, (_, i) => cts.values[i] ?? 0) : undefined,
    sync: syncSamples(buf, stbl, n),
    groups: sampleGroups(buf, stbl, n),
    dependencies: sdtp && Uint8Array.from(buf.subarray(sdtp.start + 4, Math.min(sdtp.end, sdtp.start + 4 + n))),
  };
}

/** An ISO-BMFF box of `type` around `payload`. */
export function box(type: string, ...payload: Buffer[]): Buffer {
  const size = 8 + payload.reduce((n, b) => n + b.length, 0);
  const head = Buffer.alloc(8);
  head.writeUInt32BE(size);
  head.write(type, 4, 'latin1');
  return Buffer.concat([head, ...payload]);
}

/** A full box: version, flags, then the payload. */
export function fullBox(type: string, version: number, payload: Buffer): Buffer {
  const vf = Buffer.alloc(4);
  vf.writeUInt32BE(version * 0x1000000);
  return box(type, vf, payload);
}

/** entry_count, then the entries: each a list of 32-bit fields (signed where negative). */
function table(rows: readonly (readonly number[])[], width: number): Buffer {
  const out = Buffer.alloc(4 + rows.length * width * 4);
  out.writeUInt32BE(rows.length);
  rows.forEach((row, r) => {
    row.forEach((v, k) => {
      if (v < 0) out.writeInt32BE(v, 4 + (r * width + k) * 4);
      else out.writeUInt32BE(v, 4 + (r * width + k) * 4);
    });
  });
  return out;
}

/** entry_count, then one unsigned 32-bit value each. */
function counted(values: ArrayLike<number>): Buffer {
  const out = Buffer.alloc(4 + values.length * 4);
  out.writeUInt32BE(values.length);
  for (let i = 0; i < values.length; i++) out.writeUInt32BE(values[i] ?? 0, 4 + i * 4);
  return out;
}

/** entry_count, then consecutive equal values as (count, value) runs (stts, ctts, sbgp). */
function runs(values: ArrayLike<number>): { payload: Buffer; negative: boolean } {
  let n = 0;
  let negative = false;
  for (let i = 0; i < values.length; i++) {
    if (i === 0 || values[i] !== values[i - 1]) n++;
    if ((values[i] ?? 0) < 0) negative = true;
  }
  const out = Buffer.alloc(4 + n * 8);
  out.writeUInt32BE(n);
  for (let i = 0, at = -4; i < values.length; i++) {
    const v = values[i] ?? 0;
    if (i === 0 || v !== values[i - 1]) {
      at += 8;
      if (v < 0) out.writeInt32BE(v, at + 4);
      else out.writeUInt32BE(v, at + 4);
    }
    out.writeUInt32BE(out.readUInt32BE(at) + 1, at);
  }
  return { payload: out, negative };
}

/** One per-sample field over the parts, one after the other (`absent` for a part without it). */
function joined<T extends Uint32Array | Int32Array | Uint8Array>(
  tables: readonly SampleTable[],
  make: (n: number) => T,
  pick: (t: SampleTable) => T | undefined,
  absent: number,
): T {
  const out = make(tables.reduce((n, t) => n + t.sizes.length, 0));
  let at = 0;
  for (const t of tables) {
    const values = pick(t);
    if (values) out.set(values, at);
    else out.fill(absent, at, at + t.sizes.length);
    at += t.sizes.length;
  }
  return out;
}

/** Output chunks of one joined track: their sample count and offset in the output. */
export interface ChunkLayout {
  count: number;
  offset: number;
}

/**
 * The stbl of the parts' samples one after the other: stsd and sgpd copied from the first
 * part (the caller checks the parts agree), the rest rebuilt over the whole. Built once; the
 * chunk offsets go in when the caller knows them (`withOffsets`).
 */
export function writeSampleTable(o: {
  stsd: Buffer;
  sgpd: readonly Buffer[];
  tables: readonly SampleTable[];
  chunks: readonly ChunkLayout[];
}): { withOffsets(co64: boolean): Buffer } {
  const { tables } = o;
  const u32 = (n: number) => new Uint32Array(n);
  const i32 = (n: number) => new Int32Array(n);
  const u8 = (n: number) => new Uint8Array(n);
  const before = [o.stsd, fullBox('stts', 0, runs(joined(tables, u32, (t) => t.durations, 0)).payload)];
  if (tables.some((t) => t.cts)) {
    const cts = runs(joined(tables, i32, (t) => t.cts, 0));
    before.push(fullBox('ctts', cts.negative ? 1 : 0, cts.payload));
  }
  if (tables.some((t) => t.sync)) {
    const flags = joined(tables, u8, (t) => t.sync, 1);
    // stss numbers samples from 1.
    const numbers: number[] = [];
    for (const [i, f] of flags.entries()) if (f) numbers.push(i + 1);
    before.push(fullBox('stss', 0, counted(numbers)));
  }
  before.push(fullBox('stsc', 0, table(chunkRuns(o.chunks), 3)));
  // stsz: sample_size 0 (each sample's size follows), then the count and the sizes.
  before.push(fullBox('stsz', 0, Buffer.concat([Buffer.alloc(4), counted(joined(tables, u32, (t) => t.sizes, 0))])));
  const after = [...o.sgpd];
  // sdtp (8.6.4): one byte per sample, 0 (unknown) for a part that wrote none.
  if (tables.some((t) => t.dependencies))
    after.push(fullBox('sdtp', 0, Buffer.from(joined(tables, u8, (t) => t.dependencies, 0))));
  for (const type of new Set(tables.flatMap((t) => [...t.groups.keys()]))) {
    const grouped = runs(joined(tables, u32, (t) => t.groups.get(type), 0)).payload;
    after.push(fullBox('sbgp', 0, Buffer.concat([Buffer.from(type, 'latin1'), grouped])));
  }
  return { withOffsets: (co64) => box('stbl', ...before, chunkOffsets(o.chunks, co64), ...after) };
}

/** stsc: (first chunk, samples per chunk, sample description 1), a row where the count changes. */
function chunkRuns(chunks: readonly ChunkLayout[]): number[][] {
  const rows: number[][] = [];
  chunks.forEach((c, i) => {
    if (rows.at(-1)?.[1] !== c.count) rows.push([i + 1, c.count, 1]);
  });
  return rows;
}

function chunkOffsets(chunks: readonly ChunkLayout[], co64: boolean): Buffer {
  if (!co64) return fullBox('stco', 0, counted(chunks.map((c) => c.offset)));
  const out = Buffer.alloc(4 + chunks.length * 8);
  out.writeUInt32BE(chunks.length);
  chunks.forEach((c, i) => {
    out.writeBigUInt64BE(BigInt(c.offset), 4 + i * 8);
  });
  return fullBox('co64', 0, out);
}
