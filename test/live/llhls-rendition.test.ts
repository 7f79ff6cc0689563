import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { type LlhlsTiming, LiveRendition, multivariantPlaylist } from '../../src/live/llhls/index.ts';
import { fmp4File, probe, topLevelBoxes } from './llhls-source.ts';

// LiveRendition fed a real ffmpeg fMP4 (6 s: a keyframe each second, fragments of 250 ms) in
// chunks: segments, parts, their files, and the playlist text tag by tag.

const TIMING: LlhlsTiming = { partTargetSecs: 0.25, segmentTargetSecs: 1, windowSecs: 30 };
/** Names from 0.m4s and init-0.mp4, so the tests can name them. */
const FROM_ZERO = { firstMsn: 0, firstRun: 0 };
const dir = await mkdtemp(path.join(tmpdir(), 'llhls-rendition-'));
after(() => rm(dir, { recursive: true, force: true }));

function feed(rendition: LiveRendition, file: Buffer, chunk = 3000): void {
  for (let at = 0; at < file.length; at += chunk) rendition.write(file.subarray(at, at + chunk));
}

async function playlistText(rendition: LiveRendition, req: Parameters<LiveRendition['playlist']>[0] = {}) {
  const answer = await rendition.playlist(req);
  assert.equal(answer.status, 200, JSON.stringify(answer));
  return answer.status === 200 ? answer.body : '';
}

interface ParsedSegment {
  msn: number;
  extinf?: number;
  parts: { duration: number; uri: string; independent: boolean }[];
  discontinuity: boolean;
  map?: string;
  pdt?: string;
}

/** The media playlist read back: its header tags and its segments with their parts. */
function parse(text: string): { tags: Map<string, string>; segments: ParsedSegment[]; tail: string[] } {
  const lines = text.trimEnd().split('\n');
  const tags = new Map<string, string>();
  const segments: ParsedSegment[] = [];
  const tail: string[] = [];
  let msn = -1;
  let current: ParsedSegment | undefined;
  let pending: Partial<ParsedSegment> = {};
  const open = (): ParsedSegment => {
    current ??= { msn: ++msn, parts: [], discontinuity: false, ...pending };
    pending = {};
    return current;
  };
  for (const line of lines) {
    const [tag, value = ''] = line.split(/:(.*)/s);
    if (tag === '#EXT-X-MEDIA-SEQUENCE') msn = Number(value) - 1;
    if (tag === '#EXT-X-DISCONTINUITY') pending.discontinuity = true;
    else if (tag === '#EXT-X-MAP') pending.map = /URI="([^"]+)"/.exec(value)?.[1] ?? '';
    else if (tag === '#EXT-X-PROGRAM-DATE-TIME') open().pdt = value;
    else if (tag === '#EXT-X-PART') {
      open().parts.push({
        duration: Number(/DURATION=([\d.]+)/.exec(value)?.[1]),
        uri: /URI="([^"]+)"/.exec(value)?.[1] ?? '',
        independent: value.includes('INDEPENDENT=YES'),
      });
    } else if (tag === '#EXTINF') open().extinf = Number.parseFloat(value);
    else if (tag !== undefined && !tag.startsWith('#')) {
      segments.push(open());
      current = undefined;
    } else if (/^#EXT-X-(PRELOAD-HINT|RENDITION-REPORT|ENDLIST)/.test(line)) tail.push(line);
    else if (tag !== undefined && current === undefined) tags.set(tag, value);
  }
  if (current !== undefined) segments.push(current);
  return { tags, segments, tail };
}

describe('a rendition fed a 6 s fMP4', async () => {
  const file = await fmp4File(6);
  const rendition = new LiveRendition({
    name: '240p0',
    numbering: FROM_ZERO,
    timing: TIMING,
    now: () => Date.UTC(2026, 0, 1),
  });
  feed(rendition, file);

  test('segments of about 1 s made of parts of about 0.25 s, each part within PART-TARGET', async () => {
    const { tags, segments } = parse(await playlistText(rendition));
    const partTarget = Number(/PART-TARGET=([\d.]+)/.exec(tags.get('#EXT-X-PART-INF') ?? '')?.[1]);
    assert.ok(partTarget >= 0.25 && partTarget < 0.3, `PART-TARGET ${partTarget}`);
    // 6 s: five whole segments and the sixth still open (its end comes with the next keyframe or end()).
    assert.equal(segments.length, 6);
    for (const s of segments.slice(0, 5)) {
      assert.ok(s.extinf !== undefined && Math.abs(s.extinf - 1) < 0.05, `segment ${s.msn}: ${s.extinf} s`);
    }
    for (const s of segments.slice(-3)) {
      assert.ok(s.parts.length >= 3 && s.parts.length <= 5, `segment ${s.msn}: ${s.parts.length} parts`);
      assert.deepEqual(
        s.parts.map((p) => p.independent),
        s.parts.map((_, i) => i === 0),
        'only the first part of a segment starts with a keyframe',
      );
      assert.deepEqual(
        s.parts.map((p) => p.uri),
        s.parts.map((_, i) => `${s.msn}.${i}.m4s`),
      );
      for (const p of s.parts) assert.ok(p.duration > 0.15 && p.duration <= partTarget, `a part of ${p.duration} s`);
      // RFC 8216bis 4.4.4.9: every part but a segment's last reaches 85% of PART-TARGET.
      for (const p of s.parts.slice(0, -1)) assert.ok(p.duration >= 0.85 * partTarget, `a part of ${p.duration} s`);
      const sum = s.parts.reduce((a, p) => a + p.duration, 0);
      if (s.extinf !== undefined) assert.ok(Math.abs(sum - s.extinf) < 0.0001, `parts ${sum} s, segment ${s.extinf} s`);
    }
  });

  test('the header tags: version, target duration, part target, server control, sequence, map', async () => {
    const text = await playlistText(rendition);
    const lines = text.split('\n');
    assert.deepEqual(lines.slice(0, 7), [
      '#EXTM3U',
      '#EXT-X-VERSION:6',
      '#EXT-X-TARGETDURATION:1',
      lines[3],
      lines[4],
      '#EXT-X-MEDIA-SEQUENCE:0',
      '#EXT-X-MAP:URI="init-0.mp4"',
    ]);
    const partTarget = Number(/^#EXT-X-PART-INF:PART-TARGET=([\d.]+)$/.exec(lines[3] ?? '')?.[1]);
    const holdBack = Number(
      /^#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=([\d.]+)$/.exec(lines[4] ?? '')?.[1],
    );
    assert.ok(holdBack >= 3 * partTarget - 0.001, `PART-HOLD-BACK ${holdBack} vs PART-TARGET ${partTarget}`);
    // Parts listed for the last segments only (within three target durations of the end).
    const { segments, tail } = parse(text);
    // The clock stands still here: each segment's date is its first part's arrival less its duration.
    for (const s of segments.slice(-3)) {
      const firstPartMs = Math.round((s.parts[0]?.duration ?? 0) * 1000);
      assert.equal(s.pdt, new Date(Date.UTC(2026, 0, 1) - firstPartMs).toISOString());
    }
    assert.deepEqual(
      segments.map((s) => s.parts.length > 0),
      [false, false, false, true, true, true],
    );
    assert.match(tail[0] ?? '', /^#EXT-X-PRELOAD-HINT:TYPE=PART,URI="(5\.[3-5]|6\.0)\.m4s"$/);
    assert.doesNotMatch(text, /ENDLIST/);
  });

  test('files: init, whole segments and parts; a segment is its parts joined, and plays', async () => {
    const init = await rendition.file('init-0.mp4');
    assert.ok(init);
    const segment = await rendition.file('2.m4s');
    const parts = await Promise.all([0, 1, 2, 3].map((i) => rendition.file(`2.${i}.m4s`)));
    assert.ok(segment && parts.every((p) => p !== undefined));
    assert.deepEqual(Buffer.concat(parts as Buffer[]), segment);
    const target = path.join(dir, 'segment2.mp4');
    await writeFile(target, Buffer.concat([init, segment]));
    const probed = await probe(target);
    assert.deepEqual(probed.codecs.sort(), ['aac', 'h264']);
    assert.equal(probed.videoFrames, 30);
    for (const missing of [
      'init-1.mp4',
      'init-00.mp4',
      '02.m4s',
      '2.01.m4s',
      '5.m4s',
      '9.m4s',
      '2.9.m4s',
      '../x',
      '2.0.m4s.bak',
    ]) {
      assert.equal(await rendition.file(missing), undefined, missing);
    }
  });

  test('stats: whole segments, media time, codecs and size from the init segment', () => {
    const stats = rendition.stats();
    assert.equal(stats.segments, 5);
    assert.ok(Math.abs(stats.segmentsSecs - 5) < 0.05, `${stats.segmentsSecs}`);
    assert.ok(Math.abs(stats.mediaSecs - 6) < 0.05, `${stats.mediaSecs}`);
    assert.ok(stats.maxSegmentSecs >= 1 && stats.maxSegmentSecs < 1.05);
    assert.ok(stats.bytes > 100_000 && stats.bytes < file.length);
    assert.equal(stats.lastPartAt, Date.UTC(2026, 0, 1));
    assert.deepEqual([stats.codecs, stats.width, stats.height], ['avc1.42c00d,mp4a.40.2', 320, 240]);
    assert.equal(rendition.ready, true);
  });

  test('with a uriQuery every URI carries it, rendition reports included', async () => {
    const other = new LiveRendition({ name: '360p0', numbering: FROM_ZERO, timing: TIMING });
    feed(other, file, 7777);
    const text = await playlistText(rendition, { uriQuery: 'jwt=a.b-c_d', others: [rendition, other] });
    const uris = [...text.matchAll(/URI="([^"]+)"/g)].map((m) => m[1] ?? '');
    const bare = text.split('\n').filter((l) => l !== '' && !l.startsWith('#'));
    assert.ok(uris.length > 10);
    for (const uri of [...uris, ...bare]) assert.ok(uri.endsWith('?jwt=a.b-c_d'), uri);
    const reports = text.split('\n').filter((l) => l.startsWith('#EXT-X-RENDITION-REPORT'));
    assert.deepEqual(reports, [
      `#EXT-X-RENDITION-REPORT:URI="../360p0/index.m3u8?jwt=a.b-c_d",LAST-MSN=5,LAST-PART=${
        (parse(await playlistText(other)).segments.at(-1)?.parts.length ?? 0) - 1
      }`,
    ]);
    const hostile = await playlistText(rendition, { uriQuery: 'jwt=x"\n#EXT-X-ENDLIST' });
    assert.doesNotMatch(hostile, /^#EXT-X-ENDLIST$/m);
    assert.match(hostile, /init-0\.mp4\?jwt=x%22%0A%23EXT-X-ENDLIST"/);
  });
});

describe('restart, end and the window', () => {
  test('restart: a new init, a discontinuity before its first segment, media time continues', async () => {
    const file = await fmp4File(3);
    const rendition = new LiveRendition({ name: 'source', numbering: FROM_ZERO, timing: TIMING });
    feed(rendition, file, 5000);
    // The dying run's last bytes, a partial fragment: restart() drops them.
    rendition.write(
      topLevelBoxes(file)
        .find((b) => b.type === 'moof')
        ?.bytes.subarray(0, 100) ?? Buffer.alloc(0),
    );
    rendition.restart();
    feed(rendition, file, 4096);
    const text = await playlistText(rendition);
    const { segments } = parse(text);
    assert.deepEqual(
      segments.map((s) => [s.msn, s.discontinuity, s.map]),
      [
        [0, false, 'init-0.mp4'],
        [1, false, undefined],
        [2, false, undefined],
        [3, true, 'init-1.mp4'],
        [4, false, undefined],
        [5, false, undefined],
      ],
    );
    assert.ok(segments[2]?.extinf, 'the run before the restart ends with a whole segment');
    assert.ok(await rendition.file('init-1.mp4'));
    assert.ok(await rendition.file('init-0.mp4'));
    assert.ok(Math.abs(rendition.stats().mediaSecs - 6) < 0.1, `${rendition.stats().mediaSecs}`);
  });

  test('bytes that are not fMP4 stop the run without a throw: the parts before stay, restart() reads again', async () => {
    const file = await fmp4File(3);
    const rendition = new LiveRendition({ name: 'source', numbering: FROM_ZERO, timing: TIMING });
    feed(rendition, file.subarray(0, file.indexOf('moof', 200_000) - 4));
    const before = rendition.stats().mediaSecs;
    rendition.write(Buffer.from([0, 0, 0, 3, 0x6d, 0x6f, 0x6f, 0x66]));
    rendition.write(file.subarray(200_000));
    assert.match(rendition.stats().unreadable ?? '', /box 'moof' of 3 bytes, shorter than its own header/);
    assert.equal(rendition.stats().mediaSecs, before, 'nothing read after the bad box');
    assert.ok(await rendition.file('0.0.m4s'));
    rendition.restart();
    feed(rendition, file);
    assert.ok(rendition.stats().mediaSecs > before + 2.5);
    assert.match(await playlistText(rendition), /#EXT-X-DISCONTINUITY\n#EXT-X-MAP:URI="init-1.mp4"/);
  });

  test('a new ffmpeg run without restart() is one too (its ftyp says so)', async () => {
    const file = await fmp4File(3);
    const rendition = new LiveRendition({ name: 'source', numbering: FROM_ZERO, timing: TIMING });
    feed(rendition, Buffer.concat([file, file]), 10_000);
    assert.match(await playlistText(rendition), /#EXT-X-DISCONTINUITY\n#EXT-X-MAP:URI="init-1.mp4"/);
  });

  test('end: the open segment is whole, EXT-X-ENDLIST, no preload hint, directives ignored', async () => {
    const file = await fmp4File(3);
    const rendition = new LiveRendition({ name: 'source', numbering: FROM_ZERO, timing: TIMING });
    feed(rendition, file);
    rendition.end();
    const text = await playlistText(rendition, { msn: 99, part: 0 });
    const { segments, tail } = parse(text);
    assert.equal(segments.length, 3);
    assert.ok(segments.every((s) => s.extinf !== undefined));
    assert.deepEqual(tail, ['#EXT-X-ENDLIST']);
    assert.ok(await rendition.file('2.m4s'));
    assert.equal(await rendition.file('3.0.m4s'), undefined, 'no part is waited for after the end');
  });

  test('the window keeps windowSecs: older segments leave the playlist and 404, and so does their init', async () => {
    const file = await fmp4File(3);
    const rendition = new LiveRendition({ name: 'source', numbering: FROM_ZERO, timing: { ...TIMING, windowSecs: 2 } });
    feed(rendition, file);
    rendition.restart();
    feed(rendition, file);
    rendition.restart();
    feed(rendition, file);
    const text = await playlistText(rendition);
    const { tags, segments } = parse(text);
    assert.equal(tags.get('#EXT-X-MEDIA-SEQUENCE'), String(segments[0]?.msn));
    assert.ok((segments[0]?.msn ?? 0) >= 5, `the first listed segment is ${segments[0]?.msn}`);
    // Two restarts: the one before the first listed segment is counted, not tagged.
    assert.equal(tags.get('#EXT-X-DISCONTINUITY-SEQUENCE'), '2');
    assert.equal(segments[0]?.map, 'init-2.mp4');
    assert.equal(await rendition.file('0.m4s'), undefined);
    assert.equal(await rendition.file('0.0.m4s'), undefined);
    assert.equal(await rendition.file('init-0.mp4'), undefined);
    assert.ok(await rendition.file(`${segments[0]?.msn}.m4s`));
  });
});

test('by default names start from the wall clock: a playbackId live again never reuses a name', async () => {
  const file = await fmp4File(3);
  const at = Date.UTC(2026, 0, 1);
  const names = async (now: number) => {
    const rendition = new LiveRendition({ name: 'source', timing: TIMING, now: () => now });
    feed(rendition, file);
    const text = await playlistText(rendition);
    return {
      init: /#EXT-X-MAP:URI="([^"]+)"/.exec(text)?.[1],
      msns: [...text.matchAll(/^(\d+)\.m4s$/gm)].map((m) => Number(m[1])),
    };
  };
  const first = await names(at);
  assert.equal(first.init, `init-${(at / 1000) % 1e9}.mp4`);
  assert.deepEqual(first.msns, [at / 100, at / 100 + 1]);
  // Published again two seconds later, after the two segments: names after the first publish's.
  const again = await names(at + 2000);
  assert.ok((again.msns[0] ?? 0) > (first.msns.at(-1) ?? 0));
  assert.notEqual(again.init, first.init);
});

test('PART-TARGET is the same from the first part on: whole frames past the configured length', async () => {
  const file = await fmp4File(3);
  const firstMoof = file.indexOf('moof') - 4;
  const secondMoof = file.indexOf('moof', firstMoof + 8) - 4;
  const rendition = new LiveRendition({ name: 'source', numbering: FROM_ZERO, timing: TIMING });
  rendition.write(file.subarray(0, secondMoof));
  const early = /PART-TARGET=([\d.]+)/.exec(await playlistText(rendition))?.[1];
  rendition.write(file.subarray(secondMoof));
  const late = /PART-TARGET=([\d.]+)/.exec(await playlistText(rendition))?.[1];
  // 30 fps: ffmpeg cuts a 0.25 s fragment at the 8th frame, 0.2667 s.
  assert.deepEqual([early, late], ['0.267', '0.267']);
});

test('audio alone: every part independent, a segment cut once it reaches the target', async () => {
  const rendition = new LiveRendition({ name: 'audio', numbering: FROM_ZERO, timing: TIMING });
  feed(rendition, await fmp4File(4, { audioOnly: true }));
  rendition.end();
  const { segments } = parse(await playlistText(rendition));
  assert.equal(rendition.stats().codecs, 'mp4a.40.2');
  assert.ok(segments.length >= 3 && segments.length <= 5, `${segments.length} segments`);
  for (const s of segments.slice(0, -1))
    assert.ok(s.extinf !== undefined && Math.abs(s.extinf - 1) < 0.2, `${s.extinf} s`);
  for (const s of segments.slice(-3)) assert.ok(s.parts.every((p) => p.independent));
});

test('the multivariant playlist lists each rendition with its bandwidth, size, codecs and frame rate', () => {
  const text = multivariantPlaylist(
    [
      { name: '240p0', bandwidth: 250_000, width: 426, height: 240, codecs: 'avc1.42c015,mp4a.40.2', frameRate: 30 },
      { name: 'source', bandwidth: 1_000_000.4 },
    ],
    'jwt=t',
  );
  assert.equal(
    text,
    [
      '#EXTM3U',
      '#EXT-X-VERSION:6',
      '#EXT-X-INDEPENDENT-SEGMENTS',
      '#EXT-X-STREAM-INF:BANDWIDTH=250000,RESOLUTION=426x240,CODECS="avc1.42c015,mp4a.40.2",FRAME-RATE=30.000',
      '240p0/index.m3u8?jwt=t',
      '#EXT-X-STREAM-INF:BANDWIDTH=1000000',
      'source/index.m3u8?jwt=t',
      '',
    ].join('\n'),
  );
});
