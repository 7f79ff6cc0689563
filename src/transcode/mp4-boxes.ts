// A small ISO-BMFF reader (ISO/IEC 14496-12) for the fMP4 files ffmpeg's HLS muxer writes:
// the tracks of an init segment (timescale, edit list shift, trex defaults) and the timing of
// a media segment (tfdt, the summed trun durations, the earliest presentation time). A DASH
// SegmentTimeline is built from these, so it places every segment where its media really is.
// Media segments are read box header by box header: only `moof` is read whole, never `mdat`.

import { open, readFile } from 'node:fs/promises';
import { InternalError } from '../lib/errors.ts';
import { topLevelBoxes } from './streamed-mp4.ts';

/** One box inside a buffer: its type and where its payload lies. */
export interface BoxView {
  type: string;
  /** Payload start (after the header). */
  start: number;
  end: number;
}

/** The child boxes found between `start` and `end` of `buf`. */
export function childBoxes(buf: Buffer, start: number, end: number): BoxView[] {
  const boxes: BoxView[] = [];
  for (let at = start; at + 8 <= end; ) {
    const small = buf.readUInt32BE(at);
    const type = buf.toString('latin1', at + 4, at + 8);
    const header = small === 1 ? 16 : 8;
    if (at + header > end) break;
    const size = small === 1 ? Number(buf.readBigUInt64BE(at + 8)) : small === 0 ? end - at : small;
    if (size < header || at + size > end) throw new InternalError(`mp4: box ${type} at ${at} overruns its parent`);
    boxes.push({ type, start: at + header, end: at + size });
    at += size;
  }
  return boxes;
}

export const child = (buf: Buffer, parent: BoxView, type: string): BoxView | undefined =>
  childBoxes(buf, parent.start, parent.end).find((b) => b.type === type);

const children = (buf: Buffer, parent: BoxView, type: string): BoxView[] =>
  childBoxes(buf, parent.start, parent.end).filter((b) => b.type === type);

/** A full box's version byte and 24-bit flags (14496-12, 4.2). */
export function fullBoxHeader(buf: Buffer, box: BoxView): { version: number; flags: number } {
  return { version: buf.readUInt8(box.start), flags: buf.readUInt32BE(box.start) & 0xffffff };
}

/** A track as its init segment describes it. */
export interface InitTrack {
  trackId: number;
  /** `vide`, `soun`, `subt`, `text`... (hdlr handler_type). */
  handler: string;
  /** Ticks per second of the track's media time (mdhd). */
  timescale: number;
  /** The first sample entry's four-character code: avc1, hvc1, av01, vp09, mp4a, Opus... */
  sampleEntry: string;
  /**
   * Media time the presentation starts at, in the track timescale, as Chromium's MSE reads
   * the edit list: the media_time of a first edit that is not empty, else 0. ffmpeg writes
   * B-frame video as an empty edit (the decoder delay) and then that delay as media_time;
   * Chromium then places the frames at tfdt + composition offset, the edit list ignored
   * (tested: segment 1 of 2 s buffers at 2.0667 s), and so does hls.js.
   */
  editShift: number;
  /** trex default_sample_duration: used where neither tfhd nor trun gives one. */
  defaultSampleDuration: number;
}

export interface InitSegment {
  tracks: InitTrack[];
}

/** The tracks of an init segment (`ftyp` + `moov`), read from the file. */
export async function readInitSegment(file: string): Promise<InitSegment> {
  return parseInitSegment(await readFile(file));
}

export function parseInitSegment(buf: Buffer): InitSegment {
  const moov = childBoxes(buf, 0, buf.length).find((b) => b.type === 'moov');
  if (!moov) throw new InternalError('mp4: the init segment has no moov box');
  const mvex = child(buf, moov, 'mvex');
  const trexDurations = new Map<number, number>();
  for (const trex of mvex ? children(buf, mvex, 'trex') : []) {
    trexDurations.set(buf.readUInt32BE(trex.start + 4), buf.readUInt32BE(trex.start + 12));
  }
  const tracks = children(buf, moov, 'trak').map((trak) => parseTrak(buf, trak, trexDurations));
  return { tracks };
}

function parseTrak(buf: Buffer, trak: BoxView, trexDurations: Map<number, number>): InitTrack {
  const tkhd = child(buf, trak, 'tkhd');
  const mdia = child(buf, trak, 'mdia');
  const mdhd = mdia && child(buf, mdia, 'mdhd');
  const hdlr = mdia && child(buf, mdia, 'hdlr');
  if (!tkhd || !mdhd || !hdlr) throw new InternalError('mp4: a trak without tkhd, mdhd or hdlr');
  // tkhd v1 has 64-bit creation and modification times before track_ID; mdhd likewise before timescale.
  const trackId = buf.readUInt32BE(tkhd.start + (fullBoxHeader(buf, tkhd).version === 1 ? 20 : 12));
  const timescale = buf.readUInt32BE(mdhd.start + (fullBoxHeader(buf, mdhd).version === 1 ? 20 : 12));
  const handler = buf.toString('latin1', hdlr.start + 8, hdlr.start + 12);
  return {
    trackId,
    handler,
    timescale,
    sampleEntry: sampleEntryType(buf, mdia) ?? '',
    editShift: editShift(buf, trak),
    defaultSampleDuration: trexDurations.get(trackId) ?? 0,
  };
}

function sampleEntryType(buf: Buffer, mdia: BoxView): string | undefined {
  const minf = child(buf, mdia, 'minf');
  const stbl = minf && child(buf, minf, 'stbl');
  const stsd = stbl && child(buf, stbl, 'stsd');
  // stsd: full box header (4), entry_count (4), then the sample entries as boxes.
  return stsd ? childBoxes(buf, stsd.start + 8, stsd.end)[0]?.type : undefined;
}

/** elst media_time of the first entry, when it is not an empty edit (media_time -1, a delay). */
function editShift(buf: Buffer, trak: BoxView): number {
  const edts = child(buf, trak, 'edts');
  const elst = edts && child(buf, edts, 'elst');
  if (!elst || buf.readUInt32BE(elst.start + 4) === 0) return 0;
  // elst: full box header, entry_count, then segment_duration and media_time (32 or 64 bits each).
  const mediaTime =
    fullBoxHeader(buf, elst).version === 1
      ? Number(buf.readBigInt64BE(elst.start + 16))
      : buf.readInt32BE(elst.start + 12);
  return Math.max(0, mediaTime);
}

/** One track's timing in a media segment, in the track's timescale. */
export interface SegmentTiming {
  trackId: number;
  /** tfdt of the segment's first fragment of the track. */
  baseMediaDecodeTime: number;
  /** The sample durations of all its fragments of the track, summed. */
  duration: number;
  /** The smallest decode time + composition offset of its samples (before the edit shift). */
  earliestPresentationTime: number;
  samples: number;
}

/** A moof holds a few bytes per sample: 16 MiB is a million samples, far above any segment. */
const MAX_MOOF_BYTES = 16 << 20;

/** The timing of each track in a media segment (`styp`? `sidx`? then `moof` + `mdat` pairs). */
export async function readMediaSegment(file: string, init: InitSegment): Promise<SegmentTiming[]> {
  const moofs = (await topLevelBoxes(file)).filter((b) => b.type === 'moof');
  if (moofs.length === 0) throw new InternalError(`mp4: ${file} has no moof box`);
  const fh = await open(file, 'r');
  try {
    const timings = new Map<number, SegmentTiming>();
    for (const box of moofs) {
      if (box.size > MAX_MOOF_BYTES) throw new InternalError(`mp4: ${file} has a ${box.size}-byte moof box`);
      const buf = Buffer.alloc(box.size);
      const { bytesRead } = await fh.read(buf, 0, box.size, box.start);
      if (bytesRead < box.size) throw new InternalError(`mp4: ${file} ends inside its moof box`);
      for (const traf of parseMoof(buf, box.header, init)) mergeTiming(timings, traf);
    }
    return [...timings.values()];
  } finally {
    await fh.close();
  }
}

function mergeTiming(timings: Map<number, SegmentTiming>, t: SegmentTiming): void {
  const seen = timings.get(t.trackId);
  if (!seen) {
    timings.set(t.trackId, t);
    return;
  }
  seen.duration += t.duration;
  seen.samples += t.samples;
  seen.earliestPresentationTime = Math.min(seen.earliestPresentationTime, t.earliestPresentationTime);
}

/** The timing of each `traf` of one `moof` (the buffer holds the whole box, header first). */
export function parseMoof(buf: Buffer, header: number, init: InitSegment): SegmentTiming[] {
  const moof: BoxView = { type: 'moof', start: header, end: buf.length };
  return children(buf, moof, 'traf').map((traf) => parseTraf(buf, traf, init));
}

function parseTraf(buf: Buffer, traf: BoxView, init: InitSegment): SegmentTiming {
  const tfhd = child(buf, traf, 'tfhd');
  const tfdt = child(buf, traf, 'tfdt');
  if (!tfhd || !tfdt) throw new InternalError('mp4: a traf without tfhd or tfdt');
  const trackId = buf.readUInt32BE(tfhd.start + 4);
  const track = init.tracks.find((t) => t.trackId === trackId);
  const defaultDuration = tfhdDefaultDuration(buf, tfhd) ?? track?.defaultSampleDuration ?? 0;
  const base =
    fullBoxHeader(buf, tfdt).version === 1
      ? Number(buf.readBigUInt64BE(tfdt.start + 4))
      : buf.readUInt32BE(tfdt.start + 4);
  const timing: SegmentTiming = {
    trackId,
    baseMediaDecodeTime: base,
    duration: 0,
    earliestPresentationTime: Number.POSITIVE_INFINITY,
    samples: 0,
  };
  // Several truns of one traf follow each other in decode time.
  for (const trun of children(buf, traf, 'trun')) {
    const run = readTrun(buf, trun, defaultDuration, base + timing.duration);
    timing.duration += run.duration;
    timing.samples += run.samples;
    timing.earliestPresentationTime = Math.min(timing.earliestPresentationTime, run.earliest);
  }
  if (timing.samples === 0) timing.earliestPresentationTime = base;
  return timing;
}

/** tfhd's default_sample_duration when its flags say it is present (0x08). */
function tfhdDefaultDuration(buf: Buffer, tfhd: BoxView): number | undefined {
  const { flags } = fullBoxHeader(buf, tfhd);
  if (!(flags & 0x08)) return undefined;
  // After track_ID: base_data_offset (0x01, 8 bytes), sample_description_index (0x02, 4 bytes).
  const at = tfhd.start + 8 + (flags & 0x01 ? 8 : 0) + (flags & 0x02 ? 4 : 0);
  return buf.readUInt32BE(at);
}

/** A trun's summed sample durations and its earliest decode + composition time. */
function readTrun(
  buf: Buffer,
  trun: BoxView,
  defaultDuration: number,
  decodeTime: number,
): { duration: number; samples: number; earliest: number } {
  const { version, flags } = fullBoxHeader(buf, trun);
  const samples = buf.readUInt32BE(trun.start + 4);
  let at = trun.start + 8 + (flags & 0x01 ? 4 : 0) + (flags & 0x04 ? 4 : 0);
  const perSample = [0x100, 0x200, 0x400, 0x800].filter((f) => flags & f).length * 4;
  if (at + samples * perSample > trun.end) throw new InternalError('mp4: a trun longer than its box');
  let dts = decodeTime;
  let earliest = Number.POSITIVE_INFINITY;
  for (let i = 0; i < samples; i++) {
    const duration = flags & 0x100 ? buf.readUInt32BE(at) : defaultDuration;
    // Composition offsets: unsigned in version 0, signed in version 1 (14496-12, 8.8.8).
    const ctoAt = at + (flags & 0x100 ? 4 : 0) + (flags & 0x200 ? 4 : 0) + (flags & 0x400 ? 4 : 0);
    const cto = flags & 0x800 ? (version === 0 ? buf.readUInt32BE(ctoAt) : buf.readInt32BE(ctoAt)) : 0;
    earliest = Math.min(earliest, dts + cto);
    dts += duration;
    at += perSample;
  }
  return { duration: dts - decodeTime, samples, earliest };
}
