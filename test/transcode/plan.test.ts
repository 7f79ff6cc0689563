import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { UnsupportedMediaError } from '../../src/lib/errors.ts';
import { keyframeArgs, segmentTiming, videoCodecArgs } from '../../src/transcode/encoders.ts';
import { codecString } from '../../src/transcode/codecs.ts';
import { planLadder, type Rendition } from '../../src/transcode/ladder.ts';
import { finalPlaylist, parseMediaPlaylist } from '../../src/transcode/playlist.ts';
import { parseProbe, type ProbeResult } from '../../src/transcode/probe.ts';
import { ProgressParser } from '../../src/transcode/progress.ts';

function probeOf(v: {
  width: number;
  height: number;
  rotation?: number;
  bit_rate?: string;
  fps?: string;
}): ProbeResult {
  return parseProbe({
    format: { duration: '10', size: '1000', format_name: 'mov' },
    streams: [
      {
        codec_type: 'video',
        codec_name: 'h264',
        width: v.width,
        height: v.height,
        pix_fmt: 'yuv420p',
        r_frame_rate: v.fps ?? '30/1',
        avg_frame_rate: v.fps ?? '30/1',
        ...(v.bit_rate ? { bit_rate: v.bit_rate } : {}),
        ...(v.rotation !== undefined ? { side_data_list: [{ rotation: v.rotation }] } : {}),
      },
      { codec_type: 'audio', codec_name: 'aac', channels: 2, sample_rate: '48000' },
    ],
  });
}
const sizes = (p: ProbeResult, profiles?: Parameters<typeof planLadder>[1]['profiles']) =>
  planLadder(p, { maxFps: 60, profiles }).map((r) => `${r.name} ${r.width}x${r.height} ${r.bitrate}`);

describe('ladder', () => {
  it('plans 360p0 and 720p0 below a 1080p source, plus the source size', () => {
    assert.deepEqual(sizes(probeOf({ width: 1920, height: 1080 })), [
      '360p0 640x360 1000000',
      '720p0 1280x720 4000000',
      '1080p0 1920x1080 7348000',
    ]);
  });
  it('never upscales and keeps sides even', () => {
    assert.deepEqual(sizes(probeOf({ width: 161, height: 121 })), ['120p0 160x120 219000']);
    assert.deepEqual(sizes(probeOf({ width: 1280, height: 720 })), ['360p0 640x360 1000000', '720p0 1280x720 4000000']);
  });
  it('turns a rotated phone video upright before planning', () => {
    assert.deepEqual(sizes(probeOf({ width: 1920, height: 1080, rotation: -90 })), [
      '360p0 360x640 1000000',
      '720p0 720x1280 4000000',
      '1080p0 1080x1920 7348000',
    ]);
  });
  it('caps bitrates at what the source carries', () => {
    assert.deepEqual(sizes(probeOf({ width: 1280, height: 720, bit_rate: '1500000' })), [
      '360p0 640x360 1000000',
      '720p0 1280x720 1500000',
    ]);
  });
  it('fits caller profiles inside the source, turned for portrait sources', () => {
    const profiles = [
      { name: 'hd', width: 1920, height: 1080, bitrate: 5_000_000 },
      { name: 'sd', width: 640, height: 360, bitrate: 800_000 },
    ];
    assert.deepEqual(sizes(probeOf({ width: 720, height: 1280 }), profiles), [
      'hd 720x1280 5000000',
      'sd 360x640 800000',
    ]);
  });
  it('plans AV1 and VP9 renditions, refuses them beside TS segments, and refuses VP8', () => {
    const plan = (encoder: 'AV1' | 'VP8' | 'VP9', tsSegments: boolean) =>
      planLadder(probeOf({ width: 640, height: 360 }), {
        maxFps: 60,
        tsSegments,
        profiles: [
          { name: 'h', width: 320, height: 180, bitrate: 5e5, profile: 'H264Baseline' },
          { name: 'v', width: 640, height: 360, bitrate: 1e6, encoder, profile: 'H264Baseline' },
        ],
      }).map((r) => `${r.name} ${r.codec} ${r.profile ?? '-'}`);
    // The H.264 profile says nothing to another encoder.
    assert.deepEqual(plan('AV1', false), ['h h264 baseline', 'v av1 -']);
    assert.deepEqual(plan('VP9', false), ['h h264 baseline', 'v vp9 -']);
    assert.throws(() => plan('AV1', true), /profile v: AV1 is only available in fMP4 \(HLS and DASH\) and MP4 outputs/);
    assert.throws(() => plan('VP8', false), UnsupportedMediaError);
    // SVT-AV1 has no all-keyframe mode; its shortest keyframe interval is two frames.
    const av1 = (gop: string) =>
      planLadder(probeOf({ width: 640, height: 360 }), {
        maxFps: 60,
        profiles: [{ name: 'a', width: 640, height: 360, bitrate: 1e6, encoder: 'AV1', gop }],
      })[0]?.gopFrames;
    assert.throws(() => av1('intra'), /gop "intra" \(every frame a keyframe\) is not available with AV1/);
    assert.equal(av1('0.01'), 2);
  });
  it('refuses rendition names the HLS trees keep for themselves', () => {
    for (const name of ['audio', 'subtitles', 'Thumbnails', 'audio/0']) {
      assert.throws(
        () =>
          planLadder(probeOf({ width: 640, height: 360 }), {
            maxFps: 60,
            profiles: [{ name, width: 640, height: 360, bitrate: 1e6 }],
          }),
        (e: unknown) => e instanceof UnsupportedMediaError && /is reserved/.test(e.message),
        name,
      );
    }
  });
  it('takes a profile gop in seconds, and Livepeer\'s "intra" as every frame a keyframe', () => {
    const gop = (g: string) =>
      planLadder(probeOf({ width: 640, height: 360, fps: '30/1' }), {
        maxFps: 60,
        profiles: [{ name: 'p', width: 640, height: 360, bitrate: 1e6, gop: g }],
      })[0]?.gopFrames;
    assert.equal(gop('2'), 60);
    assert.equal(gop('intra'), 1);
  });
  it('caps the frame rate of the default ladder', () => {
    assert.equal(planLadder(probeOf({ width: 640, height: 360, fps: '120/1' }), { maxFps: 60 })[0]?.fps.num, 60000);
  });
});

/** A rendition as the planner makes it, with the fields a test cares about. */
function rendition(over: Partial<Rendition>): Rendition {
  return {
    name: 'r',
    width: 640,
    height: 360,
    bitrate: 1e6,
    fps: { num: 30, den: 1 },
    codec: 'h264',
    profile: 'high',
    noBFrames: false,
    gopFrames: undefined,
    crf: undefined,
    ...over,
  };
}

describe('segment timing', () => {
  it('cuts on whole frames never longer than the requested duration', () => {
    const at = (num: number, den: number) => segmentTiming(6, rendition({ fps: { num, den } }));
    assert.deepEqual(at(30, 1).frames, 180);
    assert.equal(at(30000, 1001).frames, 179);
    assert.ok(at(30000, 1001).segment <= 6);
    assert.ok(at(24, 1).cutAt < 6 && at(24, 1).cutAt > 6 - 1 / 24);
  });
  it("makes a segment a whole number of equal GOPs within the profile's gop", () => {
    const at = (gopFrames: number | undefined) =>
      segmentTiming(6, rendition({ fps: { num: 30000, den: 1001 }, gopFrames }));
    // 179 frames is prime: three GOPs of 59 (gop "2" asks 60), the segment 177 frames.
    assert.deepEqual([at(60).frames, at(60).gop], [177, 59]);
    assert.deepEqual([at(undefined).frames, at(undefined).gop], [179, 179]);
    assert.deepEqual([at(1).frames, at(1).gop], [179, 1]);
    assert.deepEqual([at(1000).frames, at(1000).gop], [179, 179]);
    // Short GOPs: as many of the asked length as fit (89 x 2), not 90 of one frame in 90.
    assert.deepEqual([at(2).frames, at(2).gop], [178, 2]);
    assert.deepEqual([at(7).frames, at(7).gop], [175, 7]);
    // Never longer than asked, never under half of it.
    for (let gop = 1; gop <= 179; gop++) {
      const t = at(gop);
      assert.ok(t.frames <= 179 && t.frames % t.gop === 0 && t.gop <= gop && t.gop * 2 >= gop, `gop ${gop}`);
    }
  });
  it("keeps hlsenc's cut time (hls_time x the segment's number) on the cut's own frame for hours", () => {
    // hlsenc cuts at the first keyframe at or after hls_time * n. At 29.25 fps (sample 07)
    // the half-frame slack used before reached three frames by the 6th cut.
    for (const fps of [
      { num: 117, den: 4 },
      { num: 30000, den: 1001 },
      { num: 60, den: 1 },
    ]) {
      const t = segmentTiming(4, rendition({ fps }));
      const frame = fps.den / fps.num;
      for (const n of [1, 6, 100, 1000]) {
        const hlsTime = Number(t.cutAt.toFixed(6));
        const cut = n * t.segment;
        // Below the cut's frame by more than a 90 kHz timestamp's rounding, above the frame before.
        assert.ok(n * hlsTime <= cut - 6e-6, `${fps.num}/${fps.den} cut ${n}`);
        assert.ok(n * hlsTime > cut - frame, `${fps.num}/${fps.den} cut ${n}`);
      }
    }
  });
});

describe('encoder arguments', () => {
  const args = (over: Partial<Rendition>, preset = 'veryfast') => {
    const r = rendition(over);
    const t = segmentTiming(4, r);
    return [...videoCodecArgs(r, { preset, frames: t.frames, hdrSource: false }), ...keyframeArgs(r, t)].join(' ');
  };
  const has = (all: string, part: string) => assert.ok(all.includes(part), `${part} in: ${all}`);

  it('gives x264 a GOP of the segment, no scene-cut keyframes, forced keyframes on the cuts', () => {
    const a = args({});
    for (const part of ['-c:v libx264', '-g 120', '-sc_threshold 0', '-force_key_frames expr:gte(t,n_forced*4.000000-'])
      has(a, part);
  });
  it('gives x265 closed GOPs of IDR keyframes', () => {
    const a = args({ codec: 'hevc' });
    for (const part of ['-c:v libx265', '-forced-idr 1', 'scenecut=0:open-gop=0']) has(a, part);
  });
  it('gives SVT-AV1 a keyint that lands on every cut and a fast preset from the x264 one', () => {
    const a = args({ codec: 'av1', gopFrames: 50 });
    // 120 frames in GOPs of at most 50: three of 40. ffmpeg 5.1's libsvtav1 ignores forced keyframes.
    for (const part of ['-c:v libsvtav1', '-b:v 1000000', '-g 40', '-preset 10']) has(a, part);
    assert.ok(!a.includes('force_key_frames'), a);
    has(args({ codec: 'av1' }, 'ultrafast'), '-preset 12');
    has(args({ codec: 'av1', crf: 51 }), '-crf 63 -maxrate 1500000');
  });
  it('gives libvpx-vp9 VBR or constrained quality and row threads', () => {
    for (const part of [
      '-c:v libvpx-vp9',
      '-b:v 1000000 -maxrate 1500000',
      '-g 120',
      '-deadline realtime',
      '-row-mt 1',
    ])
      has(args({ codec: 'vp9' }), part);
    has(args({ codec: 'vp9', crf: 23 }), '-crf 28 -b:v 1500000');
    has(args({ codec: 'vp9' }, 'slow'), '-deadline good -cpu-used 2');
  });
});

describe('ffmpeg -progress parser', () => {
  it('reads out_time_us across chunks split anywhere', () => {
    const text =
      'frame=10\nout_time_us=1500000\nprogress=continue\nframe=20\nout_time_us=N/A\nout_time_us=3000000\nprogress=end\n';
    for (let cut = 1; cut < text.length; cut++) {
      const seen: number[] = [];
      const p = new ProgressParser((s) => seen.push(s));
      p.push(Buffer.from(text.slice(0, cut)));
      p.push(Buffer.from(text.slice(cut)));
      assert.deepEqual(seen, [1.5, 3], `cut at ${cut}`);
    }
  });
});

describe('playlists and codecs', () => {
  it('parses a media playlist', () => {
    const text =
      '#EXTM3U\n#EXT-X-TARGETDURATION:0\n#EXT-X-PLAYLIST-TYPE:EVENT\n#EXT-X-MAP:URI="init.mp4"\n#EXTINF:5.97,\n0.m4s\n#EXTINF:1.5,\n1.m4s\n#EXT-X-ENDLIST\n';
    const pl = parseMediaPlaylist(text);
    assert.deepEqual(pl, {
      targetDuration: 0,
      map: 'init.mp4',
      ended: true,
      type: 'EVENT',
      segments: [
        { uri: '0.m4s', duration: 5.97 },
        { uri: '1.m4s', duration: 1.5 },
      ],
    });
    // Published: a VOD playlist whose target duration is the longest segment, rounded.
    const published = parseMediaPlaylist(
      finalPlaylist(
        text,
        pl.segments.map((s) => s.duration),
      ),
    );
    assert.deepEqual(
      { type: published.type, targetDuration: published.targetDuration },
      { type: 'VOD', targetDuration: 6 },
    );
  });
  it('writes RFC 6381 codec strings', () => {
    assert.equal(codecString({ codec_name: 'h264', profile: 'High', level: 40 }), 'avc1.640028');
    assert.equal(codecString({ codec_name: 'h264', profile: 'Constrained Baseline', level: 30 }), 'avc1.42E01E');
    assert.equal(codecString({ codec_name: 'aac' }), 'mp4a.40.2');
    assert.equal(codecString({ codec_name: 'hevc', profile: 'Main', level: 120 }), 'hvc1.1.6.L120.B0');
  });
  it('reads AV1 and VP9 codec strings from the av1C and vpcC boxes', () => {
    const box = (type: string, payload: number[]) => {
      const b = Buffer.alloc(8 + payload.length);
      b.writeUInt32BE(b.length, 0);
      b.write(type, 4, 'latin1');
      Buffer.from(payload).copy(b, 8);
      // Somewhere inside an init segment, behind other bytes.
      return Buffer.concat([Buffer.from('\0\0\0\x10ftypiso6\0\0\0\0', 'latin1'), b]);
    };
    // seq_profile 0, seq_level_idx 8 (4.0), main tier, 10-bit 4:2:0.
    assert.equal(codecString({ codec_name: 'av1' }, box('av1C', [0x81, 0x08, 0x4c, 0])), 'av01.0.08M.10');
    // seq_profile 1, level 13 (5.1), high tier, 8-bit.
    assert.equal(codecString({ codec_name: 'av1' }, box('av1C', [0x81, 0x2d, 0x80, 0])), 'av01.1.13H.08');
    // VP9 profile 0, level 3.1, 8-bit (a FullBox: version 1, flags 0).
    const vpcc = [1, 0, 0, 0, 0, 31, 0x80, 1, 1, 1, 0, 0];
    assert.equal(codecString({ codec_name: 'vp9' }, box('vpcC', vpcc)), 'vp09.00.31.08');
  });
  it('falls back to ffprobe fields and the picture size without those boxes', () => {
    assert.equal(codecString({ codec_name: 'av1', profile: 'Main', level: 5, pix_fmt: 'yuv420p' }), 'av01.0.05M.08');
    // No level from ffprobe: the lowest level 1280x720 at 30 fps fits (3.1).
    assert.equal(codecString({ codec_name: 'av1', width: 1280, height: 720 }), 'av01.0.05M.08');
    assert.equal(
      codecString({
        codec_name: 'vp9',
        profile: 'Profile 0',
        level: -99,
        width: 1920,
        height: 1080,
        avg_frame_rate: '30/1',
      }),
      'vp09.00.40.08',
    );
    // A box too short to hold the record is not read.
    assert.equal(
      codecString({ codec_name: 'vp9', width: 320, height: 240 }, Buffer.from('\0\0\0\x09vpcC\x01', 'latin1')),
      'vp09.00.20.08',
    );
  });
  it('refuses an audio-only file', () => {
    assert.throws(
      () => parseProbe({ format: {}, streams: [{ codec_type: 'audio', codec_name: 'aac' }] }),
      /audio only/,
    );
  });
});
