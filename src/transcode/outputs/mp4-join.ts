// One faststart MP4 joined from parts in Node, without ffmpeg: a chunked run's rendition from
// its chunks' video parts and its audio pieces' `.m4a` parts. Each part's `moov` is read (the
// sample tables of its tracks), one `moov` is written over the whole (each track's samples of
// its parts one after the other, the first part's sample description and edit list), and the
// parts' media data is copied behind it in one pass, chunk by chunk in time order across the
// tracks so video and audio interleave as a player reads them. The samples are the parts'
// own bytes and timing: what ffmpeg's concat demuxer (`-auto_convert 0`) and a faststart
// remux give, without their two passes over the whole file. Its default `auto_convert` adds
// the H.264 parameter sets in front of every key frame, which the single run's MP4 lacks.

import { open } from 'node:fs/promises';
import { InternalError } from '../../lib/errors.ts';
import { child, childBoxes, fullBoxHeader, type BoxView } from '../mp4-boxes.ts';
import { topLevelBoxes } from '../streamed-mp4.ts';
import { writeRanges, type ByteRange } from './byte-ranges.ts';
import { comparableStsd, joinedStsd, statedRates, type SampleRates } from './mp4-sample-entry.ts';
import {
  box,
  fullBox,
  readSampleTable,
  writeSampleTable,
  type ChunkLayout,
  type SampleTable,
} from './mp4-sample-tables.ts';

/** An output chunk holds at most this much of one track: the interleaving a player reads through. */
const CHUNK_SECS = 0.5;
const CHUNK_BYTES = 1 << 20;
/** A part's `moov` is a few bytes per sample: far below this for any part we write. */
const MAX_MOOV_BYTES = 256 << 20;

export interface JoinMp4Options {
  /**
   * The parts, as sequences in time: every track of a sequence's files is joined across its
   * files, and the tracks come out in sequence order (the video parts, then the `.m4a`s).
   */
  sequences: readonly (readonly string[])[];
  output: string;
  signal?: AbortSignal | undefined;
}

interface PartTrack {
  /** The part's `moov` (the track's boxes are read from it) and where the trak lies. */
  moov: Buffer;
  trak: BoxView;
  handler: string;
  timescale: number;
  stsd: Buffer;
  sgpd: Buffer[];
  table: SampleTable;
}

interface Part {
  file: string;
  ftyp: Buffer;
  moov: Buffer;
  tracks: PartTrack[];
}

const fail = (what: string): never => {
  throw new InternalError(`mp4 join: ${what}`);
};

/** A box as it lies in `buf` (re-headed: a moov child is never near 4 GiB). */
const raw = (buf: Buffer, b: BoxView): Buffer => box(b.type, buf.subarray(b.start, b.end));

async function readPart(file: string): Promise<Part> {
  const top = await topLevelBoxes(file);
  const at = (type: string) => top.find((b) => b.type === type);
  const moovBox = at('moov') ?? fail(`${file} has no moov box`);
  const ftypBox = at('ftyp') ?? fail(`${file} has no ftyp box`);
  if (moovBox.size > MAX_MOOV_BYTES) fail(`${file} has a ${moovBox.size}-byte moov box`);
  const fh = await open(file, 'r');
  try {
    const read = async (b: { start: number; size: number }) => {
      const buf = Buffer.alloc(b.size);
      await fh.read(buf, 0, b.size, b.start);
      return buf;
    };
    const moov = await read(moovBox);
    const top0 = { type: 'moov', start: moovBox.header, end: moov.length };
    if (child(moov, top0, 'mvex')) fail(`${file} is fragmented`);
    const tracks = childBoxes(moov, top0.start, top0.end)
      .filter((b) => b.type === 'trak')
      .map((trak) => readTrack(moov, trak));
    return { file, ftyp: await read(ftypBox), moov, tracks };
  } finally {
    await fh.close();
  }
}

function readTrack(moov: Buffer, trak: BoxView): PartTrack {
  const mdia = child(moov, trak, 'mdia') ?? fail('a trak without mdia');
  const mdhd = child(moov, mdia, 'mdhd') ?? fail('a trak without mdhd');
  const hdlr = child(moov, mdia, 'hdlr') ?? fail('a trak without hdlr');
  const minf = child(moov, mdia, 'minf');
  const stbl = (minf && child(moov, minf, 'stbl')) ?? fail('a trak without stbl');
  const stsd = child(moov, stbl, 'stsd') ?? fail('a trak without stsd');
  if (moov.readUInt32BE(stsd.start + 4) !== 1) fail('a track with more than one sample description');
  return {
    moov,
    trak,
    handler: moov.toString('latin1', hdlr.start + 8, hdlr.start + 12),
    timescale: moov.readUInt32BE(mdhd.start + (fullBoxHeader(moov, mdhd).version === 1 ? 20 : 12)),
    stsd: raw(moov, stsd),
    sgpd: childBoxes(moov, stbl.start, stbl.end)
      .filter((b) => b.type === 'sgpd')
      .map((b) => raw(moov, b)),
    table: readSampleTable(moov, stbl),
  };
}

/** A run of one track's consecutive samples from one part, written together. */
interface OutputChunk extends ChunkLayout {
  bytes: number;
  /** Its first sample's decode time, seconds. */
  time: number;
  /** Where its samples lie in the part: one range per run of them that is contiguous there. */
  ranges: ByteRange[];
}

/** One track of the output: its parts in order, and its timing over the whole. */
interface JoinedTrack {
  parts: PartTrack[];
  /** Σ sample durations (mdhd), in the track's timescale. */
  mediaDuration: number;
  /** The latest decode time + composition offset + duration: where the presentation ends. */
  presentationEnd: number;
  /** Where the last part's samples start (its decode time 0) in the whole. */
  lastPartStart: number;
  chunks: OutputChunk[];
  sampleTable?: ReturnType<typeof writeSampleTable>;
}

/** The tracks of a sequence's parts, each joined across them (the parts must agree on them). */
function joinSequence(parts: readonly Part[]): JoinedTrack[] {
  const first = parts[0] ?? fail('a sequence without parts');
  return first.tracks.map((t, k) => {
    const tracks = parts.map((p) => p.tracks[k] ?? fail(`${p.file} has fewer tracks than ${first.file}`));
    for (const [i, pt] of tracks.entries()) {
      const codec = (x: PartTrack) => comparableStsd(x.stsd, x.handler);
      const same = pt.handler === t.handler && pt.timescale === t.timescale && codec(pt).equals(codec(t));
      if (!same) fail(`${parts[i]?.file} differs from ${first.file} in track ${k + 1}'s kind, timescale or codec`);
      if (Buffer.concat(pt.sgpd).compare(Buffer.concat(t.sgpd)) !== 0) fail(`the parts' sample groups differ`);
    }
    return layoutTrack(
      tracks,
      parts.map((p) => p.file),
    );
  });
}

/**
 * The track's output chunks: runs of a part's samples, up to CHUNK_SECS or CHUNK_BYTES. A
 * part's own chunking does not carry over: an `.m4a` of several tracks interleaves them
 * sample by sample, which would be an output chunk per sample.
 */
function layoutTrack(parts: PartTrack[], files: string[]): JoinedTrack {
  const track: JoinedTrack = { parts, mediaDuration: 0, presentationEnd: 0, lastPartStart: 0, chunks: [] };
  const { timescale } = parts[0] ?? fail('a track without parts');
  for (const [p, { table }] of parts.entries()) {
    let chunk: OutputChunk | undefined;
    track.lastPartStart = track.mediaDuration;
    for (let i = 0; i < table.sizes.length; i++) {
      const size = table.sizes[i] ?? 0;
      const start = table.offsets[i] ?? 0;
      const dts = track.mediaDuration;
      if (!chunk || dts - chunk.time * timescale >= CHUNK_SECS * timescale || chunk.bytes + size > CHUNK_BYTES) {
        chunk = { bytes: 0, count: 0, offset: 0, time: dts / timescale, ranges: [] };
        track.chunks.push(chunk);
      }
      const last = chunk.ranges.at(-1);
      if (last && last.start + last.bytes === start) last.bytes += size;
      else chunk.ranges.push({ file: files[p] ?? '', start, bytes: size });
      chunk.count++;
      chunk.bytes += size;
      track.mediaDuration += table.durations[i] ?? 0;
      track.presentationEnd = Math.max(track.presentationEnd, track.mediaDuration + (table.cts?.[i] ?? 0));
    }
  }
  return track;
}

/** A full box's fields patched: each (offset in the v0 layout, offset in v1, value). */
function patched(buf: Buffer, b: BoxView, fields: readonly [number, number, number][]): Buffer {
  const out = Buffer.from(buf.subarray(b.start, b.end));
  const v1 = fullBoxHeader(buf, b).version === 1;
  for (const [at0, at1, value] of fields) {
    if (v1) out.writeBigUInt64BE(BigInt(value), at1);
    else if (value > 0xffffffff) fail(`a ${b.type} duration too long for its version 0 box`);
    else out.writeUInt32BE(value, at0);
  }
  return box(b.type, out);
}

interface Edit {
  /** In the movie timescale. */
  duration: number;
  /** In the track's timescale; -1: an empty edit. */
  mediaTime: number;
  rate: number;
}

/** A part's edit list (elst, version 0 or 1), empty without one. */
function edits(t: PartTrack): Edit[] {
  const { moov, trak } = t;
  const edts = child(moov, trak, 'edts');
  const elst = edts && child(moov, edts, 'elst');
  if (!elst) return [];
  const v1 = fullBoxHeader(moov, elst).version === 1;
  const width = v1 ? 20 : 12;
  return Array.from({ length: moov.readUInt32BE(elst.start + 4) }, (_, e) => {
    const at = elst.start + 8 + e * width;
    return {
      duration: v1 ? Number(moov.readBigUInt64BE(at)) : moov.readUInt32BE(at),
      mediaTime: v1 ? Number(moov.readBigInt64BE(at + 8)) : moov.readInt32BE(at + 4),
      rate: moov.readUInt32BE(at + (v1 ? 16 : 8)),
    };
  });
}

/**
 * The first part's edit list, its last edit running to the end of the whole less what the
 * last part's own edit leaves out at its end (an encoder's padding after the last sample).
 */
function editList(t: JoinedTrack, movieTimescale: number): { box: Buffer; duration: number } | undefined {
  const first = t.parts[0] ?? fail('a track without parts');
  const rows = edits(first);
  const last = rows.at(-1);
  if (!last) return undefined;
  const toMedia = (d: number) => (d * first.timescale) / movieTimescale;
  const lastPart = t.parts.at(-1) ?? first;
  const lastEdit = edits(lastPart).at(-1);
  const lastShown = t.presentationEnd - t.lastPartStart - (lastEdit?.mediaTime ?? 0);
  const trim = lastEdit && lastEdit.mediaTime >= 0 ? Math.max(0, lastShown - toMedia(lastEdit.duration)) : 0;
  // Rounded up as ffmpeg's muxer does, so the last sample is kept whole.
  if (last.mediaTime >= 0)
    last.duration = Math.ceil(((t.presentationEnd - last.mediaTime - trim) * movieTimescale) / first.timescale);
  const out = Buffer.alloc(4 + rows.length * 20);
  out.writeUInt32BE(rows.length);
  rows.forEach((r, e) => {
    out.writeBigUInt64BE(BigInt(r.duration), 4 + e * 20);
    out.writeBigInt64BE(BigInt(r.mediaTime), 12 + e * 20);
    out.writeUInt32BE(r.rate, 20 + e * 20);
  });
  // Written as version 1 (64-bit fields): the one layout that holds any film's length.
  return { box: box('edts', fullBox('elst', 1, out)), duration: rows.reduce((n, r) => n + r.duration, 0) };
}

function trakBox(
  t: JoinedTrack,
  o: { id: number; movieTimescale: number; co64: boolean },
): { box: Buffer; duration: number } {
  const first = t.parts[0] ?? fail('a track without parts');
  const { moov, trak } = first;
  const edit = editList(t, o.movieTimescale);
  const duration = edit?.duration ?? Math.ceil((t.mediaDuration * o.movieTimescale) / first.timescale);
  const stsd = joinedStsd(first.stsd, first.handler, { rates: rates(t), trackId: o.id });
  // The sample tables are built once: the moov is written twice, before and after its size places the chunks.
  t.sampleTable ??= writeSampleTable({ stsd, sgpd: first.sgpd, tables: t.parts.map((p) => p.table), chunks: t.chunks });
  const stbl = t.sampleTable.withOffsets(o.co64);
  const rebuild = (parent: BoxView, map: (b: BoxView) => Buffer | undefined): Buffer[] =>
    childBoxes(moov, parent.start, parent.end).map((b) => map(b) ?? raw(moov, b));
  const minf = (b: BoxView) => box('minf', ...rebuild(b, (c) => (c.type === 'stbl' ? stbl : undefined)));
  const mdia = (b: BoxView) =>
    box(
      'mdia',
      ...rebuild(b, (c) =>
        c.type === 'mdhd' ? patched(moov, c, [[16, 24, t.mediaDuration]]) : c.type === 'minf' ? minf(c) : undefined,
      ),
    );
  const children = rebuild(trak, (b) => {
    if (b.type === 'tkhd')
      return patched(moov, b, [
        [12, 20, o.id],
        [20, 28, duration],
      ]);
    if (b.type === 'edts') return edit?.box ?? Buffer.alloc(0);
    return b.type === 'mdia' ? mdia(b) : undefined;
  });
  return { box: box('trak', ...children), duration };
}

/** The rates over the whole, as ffmpeg's muxer states them: the average, and the largest a part states. */
function rates(t: JoinedTrack): SampleRates {
  const timescale = t.parts[0]?.timescale ?? 0;
  const bytes = t.chunks.reduce((n, c) => n + c.bytes, 0);
  const avg = t.mediaDuration > 0 ? Math.floor((8 * bytes * timescale) / t.mediaDuration) : 0;
  const stated = t.parts.map((p) => statedRates(p.stsd, p.handler));
  return {
    avg,
    max: Math.max(avg, ...stated.map((r) => r.max)),
    bufferSize: Math.max(0, ...stated.map((r) => r.bufferSize)),
  };
}

/** The output's moov: the first part's mvhd and udta, a trak per joined track. */
function moovBox(first: Part, tracks: readonly JoinedTrack[], co64: boolean): Buffer {
  const { moov } = first;
  const top = childBoxes(moov, 8, moov.length);
  const mvhd = top.find((b) => b.type === 'mvhd') ?? fail(`${first.file} has no mvhd`);
  const movieTimescale = moov.readUInt32BE(mvhd.start + (fullBoxHeader(moov, mvhd).version === 1 ? 20 : 12));
  const traks = tracks.map((t, i) => trakBox(t, { id: i + 1, movieTimescale, co64 }));
  const duration = Math.max(0, ...traks.map((t) => t.duration));
  const header = patched(moov, mvhd, [[16, 24, duration]]);
  // next_track_ID, the last field of mvhd.
  header.writeUInt32BE(tracks.length + 1, header.length - 4);
  const udta = top.filter((b) => b.type === 'udta').map((b) => raw(moov, b));
  return box('moov', header, ...traks.map((t) => t.box), ...udta);
}

/** The output chunks of every track in time order (video first at a tie), and the mdat's size. */
function interleave(tracks: readonly JoinedTrack[]): { order: OutputChunk[]; mediaBytes: number } {
  const order = tracks.flatMap((t) => t.chunks).map((c, i) => ({ c, i }));
  order.sort((a, b) => a.c.time - b.c.time || a.i - b.i);
  return { order: order.map((o) => o.c), mediaBytes: order.reduce((n, o) => n + o.c.bytes, 0) };
}

/** Joins the parts into `output` (see the module comment); returns the file's size. */
export async function joinMp4s(o: JoinMp4Options): Promise<number> {
  const sequences: Part[][] = [];
  // One part at a time: a film's parts are hundreds of files, each read for its moov only.
  for (const files of o.sequences) {
    const parts: Part[] = [];
    for (const file of files) parts.push(await readPart(file));
    sequences.push(parts);
  }
  const first = sequences[0]?.[0] ?? fail('no parts');
  const tracks = sequences.flatMap(joinSequence);
  const { order, mediaBytes } = interleave(tracks);
  // 32-bit chunk offsets while the whole file stays under 4 GiB (the moov is far below 64 MiB).
  const co64 = mediaBytes + (64 << 20) > 0xffffffff;
  const mdatHeader = mediaBytes + 8 > 0xffffffff ? 16 : 8;
  const head = first.ftyp.length + moovBox(first, tracks, co64).length + mdatHeader;
  let at = head;
  for (const c of order) {
    c.offset = at;
    at += c.bytes;
  }
  const mdat = Buffer.alloc(mdatHeader);
  if (mdatHeader === 16) mdat.writeUInt32BE(1);
  else mdat.writeUInt32BE(mediaBytes + 8);
  mdat.write('mdat', 4, 'latin1');
  if (mdatHeader === 16) mdat.writeBigUInt64BE(BigInt(mediaBytes + 16), 8);
  const header = Buffer.concat([first.ftyp, moovBox(first, tracks, co64), mdat]);
  if (header.length !== head) fail('the moov changed size with its offsets');
  await writeRanges({ output: o.output, head: header, ranges: order.flatMap((c) => c.ranges), signal: o.signal });
  return at;
}
