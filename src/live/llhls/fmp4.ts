import { InputUnreadableError } from '../../lib/errors.ts';
import { type ChildBox, childBoxes, findChild, findChildren, findPath } from './boxes.ts';

// Readers of the two kinds of top-level content in ffmpeg's fragmented MP4 (ISO/IEC 14496-12):
// the init segment (ftyp + moov: tracks, timescales, codecs, size) and a fragment (moof:
// per track its decode time, its samples' durations, whether it starts on a sync sample).

export { type Box, BoxSplitter } from './boxes.ts';

export interface TrackInfo {
  trackId: number;
  /** `vide`, `soun`, ... (hdlr handler_type). */
  handler: string;
  timescale: number;
  /** RFC 6381 codec string: avc1.PPCCLL, mp4a.40.N, else the sample entry's type. */
  codec?: string;
  width?: number;
  height?: number;
  /** trex defaults, used when a fragment's tfhd and trun give none. */
  defaultSampleDuration: number;
  defaultSampleFlags: number;
}

export interface InitInfo {
  tracks: TrackInfo[];
  /** The CODECS attribute: every track's codec, video first. */
  codecs?: string;
  width?: number;
  height?: number;
}

export interface TrackFragment {
  trackId: number;
  /** tfdt baseMediaDecodeTime, in the track's timescale. */
  baseMediaDecodeTime: number;
  /** Sum of the sample durations, in the track's timescale. */
  duration: number;
  sampleCount: number;
  /** Whether the first sample is a sync sample (sample_is_non_sync_sample clear). */
  startsWithSync: boolean;
  /** The median sample duration (a frame, for video; the first sample's may be odd), 0 without samples. */
  sampleDuration: number;
}

/** sample_is_non_sync_sample in a sample_flags word (14496-12, 8.8.3.1). */
const NON_SYNC_SAMPLE = 0x0001_0000;

/** Reads the init segment: the moov of `init` (ftyp + moov, or moov alone). */
export function readInit(init: Buffer): InitInfo {
  return unreadableOnOverrun('init segment', () => readMoov(init));
}

/**
 * A box whose fields run past its end makes Buffer's readers throw a RangeError: one error
 * for a malformed stream, whatever field broke.
 */
function unreadableOnOverrun<T>(what: string, read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof InputUnreadableError) throw err;
    throw new InputUnreadableError(`fragmented MP4 unreadable: a malformed ${what}`, { cause: err });
  }
}

function readMoov(init: Buffer): InitInfo {
  const moov = findChild(init, { start: 0, end: init.length }, 'moov');
  if (moov === undefined) throw new InputUnreadableError('fragmented MP4 unreadable: an init segment without moov');
  const defaults = trackDefaults(init, moov);
  const tracks = findChildren(init, moov, 'trak').map((trak) => readTrack(init, trak, defaults));
  const ordered = [...tracks].sort((a, b) => Number(b.handler === 'vide') - Number(a.handler === 'vide'));
  const codecs = ordered.flatMap((t) => (t.codec === undefined ? [] : [t.codec])).join(',');
  const video = ordered.find((t) => t.handler === 'vide');
  return {
    tracks,
    ...(codecs === '' ? {} : { codecs }),
    ...(video?.width === undefined ? {} : { width: video.width }),
    ...(video?.height === undefined ? {} : { height: video.height }),
  };
}

interface TrexDefaults {
  duration: number;
  flags: number;
}

/** moov/mvex/trex per track id: the fragment defaults of each track. */
function trackDefaults(buf: Buffer, moov: ChildBox): Map<number, TrexDefaults> {
  const out = new Map<number, TrexDefaults>();
  const mvex = findChild(buf, moov, 'mvex');
  if (mvex === undefined) return out;
  for (const trex of findChildren(buf, mvex, 'trex')) {
    // version+flags(4) track_ID(4) default_sample_description_index(4) duration(4) size(4) flags(4)
    out.set(buf.readUInt32BE(trex.start + 4), {
      duration: buf.readUInt32BE(trex.start + 12),
      flags: buf.readUInt32BE(trex.start + 20),
    });
  }
  return out;
}

function readTrack(buf: Buffer, trak: ChildBox, defaults: Map<number, TrexDefaults>): TrackInfo {
  const tkhd = need(buf, trak, ['tkhd']);
  const version = buf.readUInt8(tkhd.start);
  const trackId = buf.readUInt32BE(tkhd.start + (version === 1 ? 20 : 12));
  // width and height are the last 8 bytes of tkhd, 16.16 fixed point.
  const width = buf.readUInt32BE(tkhd.end - 8) >>> 16;
  const height = buf.readUInt32BE(tkhd.end - 4) >>> 16;
  const mdhd = need(buf, trak, ['mdia', 'mdhd']);
  const timescale = buf.readUInt32BE(mdhd.start + (buf.readUInt8(mdhd.start) === 1 ? 20 : 12));
  const hdlr = need(buf, trak, ['mdia', 'hdlr']);
  const handler = buf.toString('latin1', hdlr.start + 8, hdlr.start + 12);
  if (timescale === 0) throw new InputUnreadableError(`fragmented MP4 unreadable: track ${trackId} has timescale 0`);
  const entry = sampleEntry(buf, trak);
  const trex = defaults.get(trackId);
  const track: TrackInfo = {
    trackId,
    handler,
    timescale,
    defaultSampleDuration: trex?.duration ?? 0,
    defaultSampleFlags: trex?.flags ?? 0,
  };
  if (entry !== undefined) {
    const codec = codecOf(buf, entry);
    if (codec !== undefined) track.codec = codec;
  }
  if (handler === 'vide') {
    const size = entry === undefined ? undefined : visualSize(buf, entry);
    track.width = width || (size?.width ?? 0);
    track.height = height || (size?.height ?? 0);
  }
  return track;
}

function need(buf: Buffer, parent: ChildBox, path: readonly string[]): ChildBox {
  const box = findPath(buf, parent, path);
  if (box === undefined) throw new InputUnreadableError(`fragmented MP4 unreadable: a track without ${path.join('/')}`);
  return box;
}

/** The first sample entry of stsd (avc1, mp4a, ...). */
function sampleEntry(buf: Buffer, trak: ChildBox): ChildBox | undefined {
  const stsd = findPath(buf, trak, ['mdia', 'minf', 'stbl', 'stsd']);
  if (stsd === undefined) return undefined;
  // version+flags(4) entry_count(4), then the entries as boxes.
  for (const entry of childBoxes(buf, stsd.start + 8, stsd.end)) return entry;
  return undefined;
}

/** A VisualSampleEntry's payload: 8 (SampleEntry) + 16 (pre-defined/reserved), then width, height, ... 78 bytes. */
const VISUAL_ENTRY_BYTES = 78;
/** An AudioSampleEntry's payload: 8 (SampleEntry) + 20: 28 bytes before its child boxes. */
const AUDIO_ENTRY_BYTES = 28;

function visualSize(buf: Buffer, entry: ChildBox): { width: number; height: number } | undefined {
  if (entry.end - entry.start < VISUAL_ENTRY_BYTES) return undefined;
  return { width: buf.readUInt16BE(entry.start + 24), height: buf.readUInt16BE(entry.start + 26) };
}

/** RFC 6381 codec strings: avc1.PPCCLL from avcC (ISO/IEC 14496-15), mp4a.OO.A from esds (14496-3). */
function codecOf(buf: Buffer, entry: ChildBox): string | undefined {
  if (entry.type === 'avc1' || entry.type === 'avc3') {
    const avcC = findChild(buf, { start: entry.start + VISUAL_ENTRY_BYTES, end: entry.end }, 'avcC');
    if (avcC === undefined || avcC.end - avcC.start < 4) return entry.type;
    const hex = (at: number): string => buf.readUInt8(at).toString(16).padStart(2, '0');
    // configurationVersion(1) AVCProfileIndication(1) profile_compatibility(1) AVCLevelIndication(1)
    return `${entry.type}.${hex(avcC.start + 1)}${hex(avcC.start + 2)}${hex(avcC.start + 3)}`;
  }
  if (entry.type === 'mp4a') {
    const esds = findChild(buf, { start: entry.start + AUDIO_ENTRY_BYTES, end: entry.end }, 'esds');
    return esds === undefined ? 'mp4a.40.2' : mp4aCodec(buf.subarray(esds.start + 4, esds.end));
  }
  return entry.type;
}

/** MPEG-4 descriptors (14496-1, 7.2.2): ES_Descr(3) > DecoderConfigDescr(4) > DecoderSpecificInfo(5). */
function mp4aCodec(esds: Buffer): string {
  const config = descriptor(esds, 0x03, 0);
  const decoderConfig = config === undefined ? undefined : descriptor(config, 0x04, esFlagsSkip(config));
  if (decoderConfig === undefined || decoderConfig.length < 1) return 'mp4a.40.2';
  const objectType = decoderConfig.readUInt8(0);
  const specific = descriptor(decoderConfig, 0x05, 13);
  const oti = objectType.toString(16);
  if (specific === undefined || specific.length < 1) return `mp4a.${oti}`;
  // AudioSpecificConfig starts with 5 bits of audioObjectType (14496-3, 1.6.2.1).
  return `mp4a.${oti}.${specific.readUInt8(0) >>> 3}`;
}

/** ES_Descriptor: ES_ID(2) flags(1) then optional fields the flags announce. */
function esFlagsSkip(es: Buffer): number {
  if (es.length < 3) return es.length;
  const flags = es.readUInt8(2);
  let at = 3;
  if (flags & 0x80) at += 2;
  if (flags & 0x40) at += 1 + (es[at] ?? 0);
  if (flags & 0x20) at += 2;
  return at;
}

/** The payload of the first descriptor with `tag` at or after `from` in `buf` (siblings scanned). */
function descriptor(buf: Buffer, tag: number, from: number): Buffer | undefined {
  let at = from;
  while (at < buf.length) {
    const thisTag = buf.readUInt8(at);
    let size = 0;
    let i = at + 1;
    // The size is 1-4 bytes of 7 bits, the high bit saying another byte follows.
    for (let n = 0; n < 4 && i < buf.length; n++) {
      const b = buf.readUInt8(i++);
      size = (size << 7) | (b & 0x7f);
      if ((b & 0x80) === 0) break;
    }
    if (thisTag === tag) return buf.subarray(i, Math.min(buf.length, i + size));
    at = i + size;
  }
  return undefined;
}

/** Reads a moof: one TrackFragment per traf. */
export function readFragment(moof: Buffer, tracks: readonly TrackInfo[]): TrackFragment[] {
  return unreadableOnOverrun('fragment', () => readMoof(moof, tracks));
}

function readMoof(moof: Buffer, tracks: readonly TrackInfo[]): TrackFragment[] {
  const box = findChild(moof, { start: 0, end: moof.length }, 'moof');
  if (box === undefined) throw new InputUnreadableError('fragmented MP4 unreadable: a fragment without moof');
  return findChildren(moof, box, 'traf').map((traf) => readTraf(moof, traf, tracks));
}

function readTraf(buf: Buffer, traf: ChildBox, tracks: readonly TrackInfo[]): TrackFragment {
  const tfhd = findChild(buf, traf, 'tfhd');
  if (tfhd === undefined) throw new InputUnreadableError('fragmented MP4 unreadable: a traf without tfhd');
  const header = readTfhd(buf, tfhd, tracks);
  const tfdt = findChild(buf, traf, 'tfdt');
  const baseMediaDecodeTime =
    tfdt === undefined
      ? 0
      : buf.readUInt8(tfdt.start) === 1
        ? Number(buf.readBigUInt64BE(tfdt.start + 4))
        : buf.readUInt32BE(tfdt.start + 4);
  const out: TrackFragment = {
    trackId: header.trackId,
    baseMediaDecodeTime,
    duration: 0,
    sampleCount: 0,
    startsWithSync: false,
    sampleDuration: 0,
  };
  const durations: number[] = [];
  for (const trun of findChildren(buf, traf, 'trun')) {
    const run = readTrun(buf, trun, header);
    if (out.sampleCount === 0 && run.sampleCount > 0) out.startsWithSync = run.firstSync;
    out.duration += run.duration;
    out.sampleCount += run.sampleCount;
    durations.push(...run.durations);
  }
  durations.sort((a, b) => a - b);
  out.sampleDuration = durations[durations.length >> 1] ?? (out.sampleCount > 0 ? header.sampleDuration : 0);
  return out;
}

interface TfhdDefaults {
  trackId: number;
  sampleDuration: number;
  sampleFlags: number;
}

/** tfhd (14496-12, 8.8.7): the optional fields its flags announce, falling back on trex. */
function readTfhd(buf: Buffer, tfhd: ChildBox, tracks: readonly TrackInfo[]): TfhdDefaults {
  const flags = buf.readUInt32BE(tfhd.start) & 0xff_ffff;
  const trackId = buf.readUInt32BE(tfhd.start + 4);
  const track = tracks.find((t) => t.trackId === trackId);
  let at = tfhd.start + 8;
  if (flags & 0x01) at += 8; // base-data-offset
  if (flags & 0x02) at += 4; // sample-description-index
  let sampleDuration = track?.defaultSampleDuration ?? 0;
  let sampleFlags = track?.defaultSampleFlags ?? 0;
  if (flags & 0x08) {
    sampleDuration = buf.readUInt32BE(at);
    at += 4;
  }
  if (flags & 0x10) at += 4; // default-sample-size
  if (flags & 0x20) sampleFlags = buf.readUInt32BE(at);
  return { trackId, sampleDuration, sampleFlags };
}

/** trun (14496-12, 8.8.8): sample count, durations and the first sample's flags. */
function readTrun(
  buf: Buffer,
  trun: ChildBox,
  defaults: TfhdDefaults,
): { sampleCount: number; duration: number; firstSync: boolean; durations: number[] } {
  const flags = buf.readUInt32BE(trun.start) & 0xff_ffff;
  const sampleCount = buf.readUInt32BE(trun.start + 4);
  let at = trun.start + 8;
  if (flags & 0x001) at += 4; // data-offset
  let firstFlags: number | undefined;
  if (flags & 0x004) {
    firstFlags = buf.readUInt32BE(at);
    at += 4;
  }
  const perSample = [0x100, 0x200, 0x400, 0x800].filter((bit) => flags & bit).length * 4;
  if (at + perSample * sampleCount > trun.end) {
    throw new InputUnreadableError(`fragmented MP4 unreadable: a trun of ${sampleCount} samples overruns its box`);
  }
  // The first sample's flags field follows its duration and size fields, when present.
  const firstFlagsAt = at + (flags & 0x100 ? 4 : 0) + (flags & 0x200 ? 4 : 0);
  if (firstFlags === undefined && flags & 0x400 && sampleCount > 0) firstFlags = buf.readUInt32BE(firstFlagsAt);
  const durations: number[] = [];
  if (flags & 0x100) for (let i = 0; i < sampleCount; i++) durations.push(buf.readUInt32BE(at + i * perSample));
  // No per-sample durations: no loop either (a count of billions costs nothing to read).
  const duration = flags & 0x100 ? durations.reduce((a, b) => a + b, 0) : sampleCount * defaults.sampleDuration;
  const first = firstFlags ?? defaults.sampleFlags;
  return { sampleCount, duration, firstSync: (first & NON_SYNC_SAMPLE) === 0, durations };
}

/** The track whose time and keyframes cut segments: video when there is one. */
export function mainTrackFragment(fragments: TrackFragment[], info: InitInfo): TrackFragment | undefined {
  const video = info.tracks.find((t) => t.handler === 'vide');
  return fragments.find((f) => f.trackId === video?.trackId) ?? fragments[0];
}
