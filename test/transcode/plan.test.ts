import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { UnsupportedMediaError } from '../../src/lib/errors.ts';
import { segmentTiming } from '../../src/transcode/encoders.ts';
import { codecString } from '../../src/transcode/codecs.ts';
import { planLadder } from '../../src/transcode/ladder.ts';
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
    assert.throws(
      () =>
        planLadder(probeOf({ width: 640, height: 360 }), {
          maxFps: 60,
          profiles: [{ name: 'v', width: 640, height: 360, bitrate: 1e6, encoder: 'VP9' }],
        }),
      UnsupportedMediaError,
    );
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

describe('segment timing', () => {
  it('cuts on whole frames never longer than the requested duration', () => {
    const at = (num: number, den: number) =>
      segmentTiming(6, { fps: { num, den } } as Parameters<typeof segmentTiming>[1]);
    assert.deepEqual(at(30, 1).frames, 180);
    assert.equal(at(30000, 1001).frames, 179);
    assert.ok(at(30000, 1001).segment <= 6);
    assert.ok(at(24, 1).cutAt < 6 && at(24, 1).cutAt > 6 - 1 / 24);
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
  it('refuses an audio-only file', () => {
    assert.throws(
      () => parseProbe({ format: {}, streams: [{ codec_type: 'audio', codec_name: 'aac' }] }),
      /audio only/,
    );
  });
});
