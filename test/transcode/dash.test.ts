// DASH over the fMP4 output (issue #19): the ISO-BMFF reader on hand-made boxes, the
// SegmentTimeline against the segments real ffmpeg writes with the pipeline's muxer options
// (B-frames and an edit list included), and the MPD read back as XML: every attribute a
// player needs, escaped, with templates that name the files on disk.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import {
  buildTimeline,
  dashManifest,
  type DashAudio,
  type DashInput,
  type DashVideo,
  type SegmentTimeline,
  timelineOf,
} from '../../src/transcode/dash.ts';
import { parseInitSegment, parseMoof, readMediaSegment } from '../../src/transcode/mp4-boxes.ts';
import { parseMediaPlaylist } from '../../src/transcode/playlist.ts';

const run = promisify(execFile);

// ---- hand-made boxes -------------------------------------------------------------------

function box(type: string, ...payload: Buffer[]): Buffer {
  const body = Buffer.concat(payload);
  const head = Buffer.alloc(8);
  head.writeUInt32BE(8 + body.length, 0);
  head.write(type, 4, 'latin1');
  return Buffer.concat([head, body]);
}

function u32(...values: number[]): Buffer {
  const b = Buffer.alloc(4 * values.length);
  values.forEach((v, i) => {
    b.writeInt32BE(v | 0, 4 * i);
  });
  return b;
}

const fullBox = (type: string, version: number, flags: number, ...payload: Buffer[]): Buffer =>
  box(type, u32(((version << 24) | flags) >>> 0), ...payload);

/** An init segment with one track: tkhd v0, mdhd v0, hdlr, an avc1 entry, an elst, and trex. */
function initSegment(o: { timescale: number; edits: [number, number][]; trexDuration: number }): Buffer {
  const tkhd = fullBox('tkhd', 0, 3, u32(0, 0, 7, 0, 0), Buffer.alloc(60));
  const mdhd = fullBox('mdhd', 0, 0, u32(0, 0, o.timescale, 0, 0x55c40000));
  const hdlr = fullBox('hdlr', 0, 0, u32(0), Buffer.from('vide', 'latin1'), Buffer.alloc(13));
  const stsd = fullBox('stsd', 0, 0, u32(1), box('avc1', Buffer.alloc(78)));
  const elst = fullBox('elst', 0, 0, u32(o.edits.length, ...o.edits.flatMap(([d, t]) => [d, t, 0x10000])));
  const trak = box('trak', tkhd, box('edts', elst), box('mdia', mdhd, hdlr, box('minf', box('stbl', stsd))));
  const trex = fullBox('trex', 0, 0, u32(7, 1, o.trexDuration, 0, 0));
  return Buffer.concat([box('ftyp', Buffer.from('iso5', 'latin1'), u32(512)), box('moov', trak, box('mvex', trex))]);
}

describe('ISO-BMFF reader', () => {
  it('reads the track of an init segment: id, handler, timescale, sample entry, edit shift, trex', () => {
    const init = parseInitSegment(initSegment({ timescale: 15360, edits: [[7000, 1024]], trexDuration: 512 }));
    assert.deepEqual(init.tracks, [
      {
        trackId: 7,
        handler: 'vide',
        timescale: 15360,
        sampleEntry: 'avc1',
        editShift: 1024,
        defaultSampleDuration: 512,
      },
    ]);
  });

  it('reads the edit list as Chromium does: a first empty edit means no shift at all', () => {
    // ffmpeg's B-frame video: a 66 ms empty edit, then the decoder delay as media_time.
    const init = parseInitSegment(
      initSegment({
        timescale: 15360,
        edits: [
          [66, -1],
          [0, 1024],
        ],
        trexDuration: 512,
      }),
    );
    assert.equal(init.tracks[0]?.editShift, 0);
    const none = parseInitSegment(initSegment({ timescale: 48000, edits: [], trexDuration: 1024 }));
    assert.equal(none.tracks[0]?.editShift, 0);
  });

  it('sums trun durations (per sample, tfhd default, trex default) and finds the earliest presentation time', () => {
    const init = parseInitSegment(initSegment({ timescale: 15360, edits: [[0, 1024]], trexDuration: 500 }));
    // tfhd with default-base-is-moof and a default duration of 512; tfdt v1 (64-bit) at 30720.
    const tfhd = fullBox('tfhd', 0, 0x020008, u32(7, 512));
    const tfdt = fullBox('tfdt', 1, 0, u32(0, 30720));
    // trun v1: data offset, then per sample a duration and a signed composition offset.
    const perSample = fullBox('trun', 1, 0x000901, u32(3, 0), u32(512, 1024), u32(400, 2048), u32(600, -512));
    // trun v0 without durations: the tfhd default applies.
    const byDefault = fullBox('trun', 0, 0x000001, u32(2, 0));
    const moof = box('moof', fullBox('mfhd', 0, 0, u32(1)), box('traf', tfhd, tfdt, perSample, byDefault));
    const [timing] = parseMoof(moof, 8, init);
    // Decode times 30720, 31232, 31632 (+ cto 1024, 2048, -512): the earliest is 31120.
    assert.deepEqual(timing, {
      trackId: 7,
      baseMediaDecodeTime: 30720,
      duration: 512 + 400 + 600 + 2 * 512,
      earliestPresentationTime: 31632 - 512,
      samples: 5,
    });
    // Without a tfhd default, trex's default duration applies.
    const bare = box('moof', box('traf', fullBox('tfhd', 0, 0x020000, u32(7)), tfdt, byDefault));
    assert.equal(parseMoof(bare, 8, init)[0]?.duration, 1000);
  });

  it('reads only the moof boxes of a segment, and every moof of it', async (t) => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'mp-boxes-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const init = parseInitSegment(initSegment({ timescale: 1000, edits: [[0, 0]], trexDuration: 40 }));
    const fragment = (at: number, samples: number): Buffer[] => [
      box(
        'moof',
        box(
          'traf',
          fullBox('tfhd', 0, 0x020000, u32(7)),
          fullBox('tfdt', 0, 0, u32(at)),
          fullBox('trun', 0, 1, u32(samples, 0)),
        ),
      ),
      // An mdat whose bytes look like boxes: a reader that walked into it would find a moof.
      box('mdat', box('moof', Buffer.alloc(64, 0xff))),
    ];
    const file = path.join(dir, '0.m4s');
    await writeFile(
      file,
      Buffer.concat([box('styp', Buffer.from('msdh', 'latin1')), ...fragment(2000, 25), ...fragment(3000, 10)]),
    );
    assert.deepEqual(await readMediaSegment(file, init), [
      { trackId: 7, baseMediaDecodeTime: 2000, duration: 1400, earliestPresentationTime: 2000, samples: 35 },
    ]);
  });
});

describe('SegmentTimeline', () => {
  it('runs equal segments together and ends each where the next starts', () => {
    const spans = [0, 2, 4, 6].map((s) => ({ start: s * 15360, duration: 30720 }));
    spans.push({ start: 8 * 15360, duration: 7680 });
    assert.deepEqual(buildTimeline(spans, 15360), {
      timescale: 15360,
      entries: [
        { t: 0, d: 30720, r: 3 },
        { t: 122880, d: 7680, r: 0 },
      ],
      segments: 5,
      end: 8.5,
      longest: 2,
    });
  });

  it('closes a gap into the segment before it and clamps a start below zero', () => {
    const tl = buildTimeline(
      [
        { start: -1024, duration: 96256 },
        { start: 95232, duration: 95232 },
        { start: 190464, duration: 1000 },
      ],
      48000,
    );
    assert.deepEqual(tl.entries, [
      { t: 0, d: 95232, r: 1 },
      { t: 190464, d: 1000, r: 0 },
    ]);
  });
});

// ---- real fMP4 from ffmpeg ---------------------------------------------------------------

const SECONDS = 7;
/** 60 frames at 30 fps, cut half a frame early, as encoders.ts segmentTiming plans a 2 s segment. */
const HLS_TIME = (2 - 0.5 / 30).toFixed(6);
const KEYFRAMES = `expr:gte(t,n_forced*2.000000-${(0.5 / 30).toFixed(6)})`;

/** command.ts teeTargets' fMP4 options, for a media playlist in `dir`. */
function fmp4Muxer(dir: string): string[] {
  return [
    ...['-f', 'hls', '-hls_time', HLS_TIME, '-hls_list_size', '0', '-hls_playlist_type', 'event'],
    ...['-hls_flags', 'independent_segments+temp_file', '-hls_segment_type', 'fmp4'],
    ...['-hls_fmp4_init_filename', 'init.mp4', '-hls_segment_filename', `${dir}/%d.m4s`, `${dir}/index.m3u8`],
  ];
}

let root: string;
let audioOnlyRoot: string;

before(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'mp-dash-'));
  audioOnlyRoot = path.join(root, 'audio-only');
  const dirs = ['360p0', 'hd 720&"$', 'audio/0', 'audio/1', 'audio-only/audio/0'];
  await Promise.all(dirs.map((d) => mkdir(path.join(root, d), { recursive: true })));
  const src = ['-f', 'lavfi', '-i', `testsrc2=size=640x360:rate=30:duration=${SECONDS}`];
  const sine = ['-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=44100:duration=${SECONDS}`];
  const video = (preset: string, rate: string) => [
    ...['-c:v', 'libx264', '-preset', preset, '-b:v', rate, '-g', '60', '-force_key_frames', KEYFRAMES],
    ...['-flags', '+global_header'],
  ];
  const aac = ['-c:a', 'aac', '-b:a', '128k', '-ac', '2', '-ar', '48000', '-flags', '+global_header'];
  await run('ffmpeg', [
    ...['-v', 'error', '-y', ...src, ...sine],
    ...['-filter_complex', '[0:v]split=2[a][b];[a]scale=320:180[v0];[b]null[v1]'],
    // ultrafast has no B-frames; veryfast has them, and with them an edit list and composition offsets.
    ...['-map', '[v0]', ...video('ultrafast', '300k'), ...fmp4Muxer(path.join(root, '360p0'))],
    ...['-map', '[v1]', ...video('veryfast', '800k'), ...fmp4Muxer(path.join(root, 'hd 720&"$'))],
    ...['-map', '1:a', ...aac, ...fmp4Muxer(path.join(root, 'audio/0'))],
    ...['-map', '1:a', ...aac, '-ac', '1', ...fmp4Muxer(path.join(root, 'audio/1'))],
  ]);
  await run('ffmpeg', [
    '-v',
    'error',
    '-y',
    ...sine,
    '-map',
    '0:a',
    ...aac,
    ...fmp4Muxer(path.join(audioOnlyRoot, 'audio/0')),
  ]);
});
after(() => rm(root, { recursive: true, force: true }));

/** Each segment's duration in seconds, from the run-length entries. */
function expand(tl: SegmentTimeline): { start: number; duration: number }[] {
  return tl.entries.flatMap((e) =>
    Array.from({ length: e.r + 1 }, (_, k) => ({
      start: (e.t + k * e.d) / tl.timescale,
      duration: e.d / tl.timescale,
    })),
  );
}

/**
 * Where ffprobe's first packet of segment n presents, read behind its init segment (it
 * applies the edit list, its empty edit in whole milliseconds: within 1 ms of Chromium).
 */
async function probedStart(dir: string, n: number): Promise<number> {
  const joined = path.join(dir, `joined-${n}.mp4`);
  await writeFile(
    joined,
    Buffer.concat([await readFile(path.join(dir, 'init.mp4')), await readFile(path.join(dir, `${n}.m4s`))]),
  );
  const { stdout } = await run('ffprobe', [
    '-v',
    'error',
    '-show_entries',
    'packet=pts_time',
    '-of',
    'csv=p=0',
    joined,
  ]);
  await rm(joined);
  return Math.min(...stdout.trim().split('\n').map(Number));
}

describe('timelineOf on real fMP4 segments', () => {
  for (const [dir, timescale] of [
    ['360p0', 15360],
    ['hd 720&"$', 15360],
    ['audio/0', 48000],
  ] as const) {
    it(`${dir}: one entry per segment, each as long as its media, summing to the duration`, async () => {
      const full = path.join(root, dir);
      const tl = await timelineOf(full);
      const playlist = parseMediaPlaylist(await readFile(path.join(full, 'index.m3u8'), 'utf8'));
      const segments = expand(tl);
      assert.equal(tl.timescale, timescale);
      assert.equal(segments.length, playlist.segments.length);
      assert.equal(tl.segments, playlist.segments.length);
      assert.ok(playlist.segments.length >= 4, `${playlist.segments.length} segments`);
      const starts = await Promise.all(segments.map((_, n) => probedStart(full, n)));
      for (const [n, s] of segments.entries()) {
        // ffmpeg's own account of the segment (EXTINF, 6 decimals) and ffprobe's timestamps agree.
        assert.ok(Math.abs(s.duration - (playlist.segments[n]?.duration ?? 0)) < 1e-3, `segment ${n}: ${s.duration}`);
        assert.ok(Math.abs(s.start - (starts[n] ?? -1)) < 1e-3, `segment ${n} at ${s.start}, ffprobe ${starts[n]}`);
        if (n > 0) assert.equal(s.start, (segments[n - 1]?.start ?? 0) + (segments[n - 1]?.duration ?? 0));
      }
      // The video's 210 frames; the audio's samples and the AAC encoder's 1024 priming samples,
      // which ffmpeg keeps (Chromium buffers audio to 7.0213 s).
      const sum = segments.reduce((a, s) => a + s.duration, 0);
      const expected = timescale === 48000 ? SECONDS + 1024 / 48000 : SECONDS;
      assert.ok(Math.abs(sum - expected) < 1e-9, `${sum} s`);
      assert.ok(Math.abs((segments[0]?.start ?? 0) + sum - tl.end) < 1e-9);
    });
  }

  it('places B-frame video where Chromium buffers it: two frames late, as ffmpeg shifted it', async () => {
    const full = path.join(root, 'hd 720&"$');
    const init = await readFile(path.join(full, 'init.mp4'));
    // The layout this rule is for: an elst of an empty edit, then the decoder delay.
    const elst = init.indexOf('elst');
    assert.equal(init.readUInt32BE(elst + 8), 2, 'two edits');
    assert.equal(init.readInt32BE(elst + 16), -1, 'the first one empty');
    const segments = expand(await timelineOf(full));
    assert.deepEqual(
      segments.slice(0, 3).map((s) => Number(s.start.toFixed(6))),
      [2 / 30, 2 + 2 / 30, 4 + 2 / 30].map((t) => Number(t.toFixed(6))),
    );
  });

  it('refuses a folder whose segments are not 0.m4s, 1.m4s, ...', async (t) => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'mp-dash-bad-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    await writeFile(path.join(dir, 'index.m3u8'), '#EXTM3U\n#EXT-X-MAP:URI="init.mp4"\n#EXTINF:2,\nseg-1.m4s\n');
    await assert.rejects(timelineOf(dir), /lists seg-1\.m4s as segment 0/);
  });
});

// ---- the MPD, read back ------------------------------------------------------------------

interface XmlNode {
  name: string;
  attrs: Record<string, string>;
  children: XmlNode[];
  text: string;
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };
const decode = (s: string): string => s.replace(/&(amp|lt|gt|quot|apos);/g, (_, e: string) => ENTITIES[e] ?? '');

/**
 * A strict reader for the XML the MPD writer produces (elements, attributes, text; no
 * comments or CDATA): throws on anything not well-formed, such as a raw `&` or `<` in an
 * attribute, or an end tag that does not close the open element.
 */
function parseXml(text: string): XmlNode {
  const declaration = /^<\?xml version="1\.0" encoding="UTF-8"\?>\n/;
  assert.match(text, declaration);
  const body = text.replace(declaration, '');
  const top: XmlNode = { name: '#document', attrs: {}, children: [], text: '' };
  const open = [top];
  const token = /<(\/?)([A-Za-z][\w:.-]*)((?:\s+[\w:.-]+="[^"<]*")*)\s*(\/?)>|([^<]+)/y;
  for (let at = 0; at < body.length; at = token.lastIndex) {
    token.lastIndex = at;
    const m = token.exec(body);
    if (!m) throw new Error(`not well-formed at ${at}: ${body.slice(at, at + 40)}`);
    const [whole, closing, name, attrText, selfClosing, chars] = m;
    const parent = open.at(-1) as XmlNode;
    if (/&(?!(amp|lt|gt|quot|apos);)/.test(whole)) throw new Error(`unescaped & in ${whole}`);
    if (chars !== undefined) parent.text += decode(chars);
    else if (closing) {
      if (parent.name !== name) throw new Error(`</${name}> closes <${parent.name}>`);
      open.pop();
    } else {
      const attrs: Record<string, string> = {};
      for (const a of (attrText ?? '').matchAll(/([\w:.-]+)="([^"]*)"/g)) {
        if (a[1] === undefined || a[1] in attrs) throw new Error(`attribute ${a[1]} twice in <${name}>`);
        attrs[a[1]] = decode(a[2] ?? '');
      }
      const node: XmlNode = { name: name ?? '', attrs, children: [], text: '' };
      parent.children.push(node);
      if (!selfClosing) open.push(node);
    }
  }
  if (open.length !== 1) throw new Error(`<${open.at(-1)?.name}> is never closed`);
  const [mpd] = top.children.filter((c) => c.name !== '#text');
  assert.ok(mpd && top.children.length === 1 && top.text.trim() === '');
  return mpd;
}

const kids = (n: XmlNode | undefined, name: string): XmlNode[] => n?.children.filter((c) => c.name === name) ?? [];
const kid = (n: XmlNode | undefined, name: string): XmlNode | undefined => kids(n, name)[0];

/** 'PT7.022S' in seconds. */
function seconds(xsDuration: string | undefined): number {
  const m = /^PT(\d+(?:\.\d+)?)S$/.exec(xsDuration ?? '');
  assert.ok(m, `an xs:duration in seconds: ${xsDuration}`);
  return Number(m[1]);
}

/** The Representation's segments as its SegmentTemplate and SegmentTimeline name them. */
function templateFiles(rep: XmlNode | undefined): {
  init: string;
  media: string[];
  timeline: { t: number; d: number }[];
} {
  const tpl = kid(rep, 'SegmentTemplate');
  assert.equal(tpl?.attrs.startNumber, '0');
  const timeline: { t: number; d: number }[] = [];
  for (const s of kids(kid(tpl, 'SegmentTimeline'), 'S')) {
    const prev = timeline.at(-1);
    let t = s.attrs.t === undefined ? (prev ? prev.t + prev.d : 0) : Number(s.attrs.t);
    for (let k = 0; k <= Number(s.attrs.r ?? 0); k++, t += Number(s.attrs.d))
      timeline.push({ t, d: Number(s.attrs.d) });
  }
  const media = timeline.map((_, n) => decodeURIComponent((tpl?.attrs.media ?? '').replace('$Number$', String(n))));
  return { init: decodeURIComponent(tpl?.attrs.initialization ?? ''), media, timeline };
}

async function dashInput(): Promise<DashInput> {
  const v = async (name: string, width: number, height: number, bandwidth: number): Promise<DashVideo> => ({
    name,
    dir: name,
    bandwidth,
    width,
    height,
    fps: { num: 30, den: 1 },
    codecs: 'avc1.64001e',
    timeline: await timelineOf(path.join(root, name)),
  });
  const a = async (i: number, lang: string | undefined, channels: number): Promise<DashAudio> => ({
    dir: `audio/${i}`,
    lang,
    label: i === 0 ? 'English & "more"' : undefined,
    default: i === 0,
    channels,
    sampleRate: 48000,
    bandwidth: 130_000,
    codecs: 'mp4a.40.2',
    timeline: await timelineOf(path.join(root, `audio/${i}`)),
  });
  return {
    video: [await v('hd 720&"$', 640, 360, 1_200_000), await v('360p0', 320, 180, 400_000)],
    audio: [await a(0, 'en', 2), await a(1, 'und', 1)],
    subtitles: [
      { uri: 'subtitles/0/0.vtt', lang: 'fr', default: true },
      { uri: 'subtitles/1/0.vtt', lang: 'not a tag!', default: false },
    ],
  };
}

describe('dashManifest', () => {
  it('writes a static isoff-live MPD as long as its longest track, well-formed with escaped names', async () => {
    const input = await dashInput();
    const mpd = parseXml(dashManifest(input));
    assert.equal(mpd.name, 'MPD');
    assert.equal(mpd.attrs.xmlns, 'urn:mpeg:dash:schema:mpd:2011');
    assert.equal(mpd.attrs.type, 'static');
    assert.equal(mpd.attrs.profiles, 'urn:mpeg:dash:profile:isoff-live:2011');
    const ends = [...input.video, ...input.audio].map((r) => r.timeline.end);
    const duration = seconds(mpd.attrs.mediaPresentationDuration);
    assert.ok(duration >= Math.max(...ends) && duration < Math.max(...ends) + 0.001, `${duration}`);
    assert.equal(seconds(mpd.attrs.minBufferTime), 2);
    const period = kid(mpd, 'Period');
    assert.deepEqual(
      kids(period, 'AdaptationSet').map((s) => [s.attrs.id, s.attrs.contentType, s.attrs.mimeType]),
      [
        ['0', 'video', 'video/mp4'],
        ['1', 'audio', 'audio/mp4'],
        ['2', 'audio', 'audio/mp4'],
        ['3', 'text', 'text/vtt'],
        ['4', 'text', 'text/vtt'],
      ],
    );
  });

  it('lists the video renditions lowest first, each template naming the files on disk at their real durations', async () => {
    const input = await dashInput();
    const [videoSet] = kids(kid(parseXml(dashManifest(input)), 'Period'), 'AdaptationSet');
    // No segmentAlignment: the B-frame rung's segments start two frames after the other's.
    assert.deepEqual(videoSet?.attrs, {
      id: '0',
      contentType: 'video',
      mimeType: 'video/mp4',
      startWithSAP: '1',
      maxWidth: '640',
      maxHeight: '360',
      maxFrameRate: '30',
    });
    const reps = kids(videoSet, 'Representation');
    assert.deepEqual(
      reps.map((r) => r.attrs),
      [
        {
          id: '360p0',
          bandwidth: '400000',
          width: '320',
          height: '180',
          frameRate: '30',
          sar: '1:1',
          codecs: 'avc1.64001e',
        },
        {
          id: 'hd_720&"$',
          bandwidth: '1200000',
          width: '640',
          height: '360',
          frameRate: '30',
          sar: '1:1',
          codecs: 'avc1.64001e',
        },
      ],
    );
    for (const [rep, dir] of [
      [reps[0], '360p0'],
      [reps[1], 'hd 720&"$'],
    ] as const) {
      const files = templateFiles(rep);
      assert.equal(files.init, `${dir}/init.mp4`);
      assert.ok(existsSync(path.join(root, files.init)));
      const playlist = parseMediaPlaylist(await readFile(path.join(root, dir, 'index.m3u8'), 'utf8'));
      assert.deepEqual(
        files.media,
        playlist.segments.map((s) => `${dir}/${s.uri}`),
      );
      const timescale = Number(kid(rep, 'SegmentTemplate')?.attrs.timescale);
      files.timeline.forEach((s, n) => {
        assert.ok(Math.abs(s.d / timescale - (playlist.segments[n]?.duration ?? 0)) < 1e-3);
      });
    }
  });

  it('gives each audio track its set: language, label, main or alternate role, channels', async () => {
    const sets = kids(kid(parseXml(dashManifest(await dashInput())), 'Period'), 'AdaptationSet');
    const [english, untagged] = [sets[1], sets[2]];
    assert.equal(english?.attrs.lang, 'en');
    assert.equal(kid(english, 'Label')?.text, 'English & "more"');
    assert.equal(kid(english, 'Role')?.attrs.value, 'main');
    assert.equal(kid(english, 'Role')?.attrs.schemeIdUri, 'urn:mpeg:dash:role:2011');
    const rep = kid(english, 'Representation');
    assert.deepEqual(rep?.attrs, {
      id: 'audio/0',
      bandwidth: '130000',
      audioSamplingRate: '48000',
      codecs: 'mp4a.40.2',
    });
    assert.deepEqual(kid(rep, 'AudioChannelConfiguration')?.attrs, {
      schemeIdUri: 'urn:mpeg:dash:23003:3:audio_channel_configuration:2011',
      value: '2',
    });
    assert.equal(templateFiles(rep).media[0], 'audio/0/0.m4s');
    assert.equal(untagged?.attrs.lang, undefined, '"und" is no language');
    assert.equal(kid(untagged, 'Role')?.attrs.value, 'alternate');
    assert.equal(kid(kid(untagged, 'Representation'), 'AudioChannelConfiguration')?.attrs.value, '1');
    // The Representation's children in schema order: AudioChannelConfiguration before SegmentTemplate.
    assert.deepEqual(
      rep?.children.map((c) => c.name),
      ['AudioChannelConfiguration', 'SegmentTemplate'],
    );
  });

  it('gives each subtitle track a text/vtt set whose BaseURL is the WebVTT file', async () => {
    const sets = kids(kid(parseXml(dashManifest(await dashInput())), 'Period'), 'AdaptationSet');
    const [french, invalid] = [sets[3], sets[4]];
    assert.equal(french?.attrs.lang, 'fr');
    assert.deepEqual(
      kids(french, 'Role').map((r) => r.attrs.value),
      ['subtitle', 'main'],
    );
    assert.deepEqual(kid(french, 'Representation')?.attrs, { id: 'subtitles/0', bandwidth: '256' });
    assert.equal(kid(kid(french, 'Representation'), 'BaseURL')?.text, 'subtitles/0/0.vtt');
    assert.equal(invalid?.attrs.lang, undefined, 'an invalid language tag is left out');
    assert.deepEqual(
      kids(invalid, 'Role').map((r) => r.attrs.value),
      ['subtitle'],
    );
  });

  it('says the segments are aligned where every rung starts them at the same times', async () => {
    const input = await dashInput();
    const [hd, sd] = input.video as [DashVideo, DashVideo];
    const text = dashManifest({ ...input, video: [hd, { ...sd, timeline: hd.timeline }] });
    const [videoSet] = kids(kid(parseXml(text), 'Period'), 'AdaptationSet');
    assert.equal(videoSet?.attrs.segmentAlignment, 'true');
  });

  it('puts a mixed ladder in one set per codec family', async () => {
    const input = await dashInput();
    const [hd, sd] = input.video as [DashVideo, DashVideo];
    const mixed = dashManifest({ ...input, video: [sd, { ...hd, codecs: 'av01.0.04M.08' }] });
    const videoSets = kids(kid(parseXml(mixed), 'Period'), 'AdaptationSet').filter(
      (s) => s.attrs.contentType === 'video',
    );
    assert.deepEqual(
      videoSets.map((s) => kids(s, 'Representation').map((r) => r.attrs.codecs)),
      [['avc1.64001e'], ['av01.0.04M.08']],
    );
  });

  it('writes audio-only media without a video set', async () => {
    const timeline = await timelineOf(path.join(audioOnlyRoot, 'audio/0'));
    const text = dashManifest({
      video: [],
      audio: [
        {
          dir: 'audio/0',
          default: true,
          channels: 2,
          sampleRate: 48000,
          bandwidth: 130_000,
          codecs: 'mp4a.40.2',
          timeline,
        },
      ],
      subtitles: [],
    });
    const mpd = parseXml(text);
    const sets = kids(kid(mpd, 'Period'), 'AdaptationSet');
    assert.deepEqual(
      sets.map((s) => s.attrs.contentType),
      ['audio'],
    );
    const files = templateFiles(kid(sets[0], 'Representation'));
    for (const f of [files.init, ...files.media]) assert.ok(existsSync(path.join(audioOnlyRoot, f)), f);
    assert.ok(Math.abs(seconds(mpd.attrs.mediaPresentationDuration) - timeline.end) < 0.001);
  });
});
