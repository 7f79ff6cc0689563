// The rewrite of a playlist or storyboard opened with ?jwt= (issue #28): every URI a player
// follows carries the token, absolute URIs (another host) keep theirs, and the rest of the
// text is untouched.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { tokenizePlaylist, tokenizeStoryboard, tokenRewriter, withToken } from '../../src/api/playlist-token.ts';
import { sheetFileName, type StoryboardPlan, storyboardVtt } from '../../src/transcode/storyboard.ts';

const T = 'aaa.bbb.ccc';

describe('tokenizePlaylist', () => {
  it('adds the token to variant playlists, renditions (EXT-X-MEDIA) and I-frame playlists of a master', () => {
    const master = [
      '#EXTM3U',
      '#EXT-X-VERSION:6',
      '#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="English",LANGUAGE="en",URI="subs/en/index.m3u8"',
      '#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="main",DEFAULT=YES',
      '#EXT-X-STREAM-INF:BANDWIDTH=400000,RESOLUTION=384x216,CODECS="avc1.64001e,mp4a.40.2",SUBTITLES="subs"',
      '216p0/index.m3u8',
      '#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=40000,URI="216p0/iframes.m3u8"',
      '',
    ].join('\n');
    assert.equal(
      tokenizePlaylist(master, T),
      [
        '#EXTM3U',
        '#EXT-X-VERSION:6',
        `#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="English",LANGUAGE="en",URI="subs/en/index.m3u8?jwt=${T}"`,
        '#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="main",DEFAULT=YES',
        '#EXT-X-STREAM-INF:BANDWIDTH=400000,RESOLUTION=384x216,CODECS="avc1.64001e,mp4a.40.2",SUBTITLES="subs"',
        `216p0/index.m3u8?jwt=${T}`,
        `#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=40000,URI="216p0/iframes.m3u8?jwt=${T}"`,
        '',
      ].join('\n'),
    );
  });

  it('adds it to segments and the init map of a media playlist, keeping CRLF line ends and comments', () => {
    const media =
      '#EXTM3U\r\n#EXT-X-MAP:URI="init.mp4",BYTERANGE="720@0"\r\n# a comment\r\n#EXTINF:2.0,\r\nseg0.m4s\r\n#EXT-X-ENDLIST\r\n';
    assert.equal(
      tokenizePlaylist(media, T),
      `#EXTM3U\r\n#EXT-X-MAP:URI="init.mp4?jwt=${T}",BYTERANGE="720@0"\r\n# a comment\r\n#EXTINF:2.0,\r\nseg0.m4s?jwt=${T}\r\n#EXT-X-ENDLIST\r\n`,
    );
  });

  it('leaves absolute URIs alone, and joins an existing query with &', () => {
    assert.equal(withToken('https://cdn.example/seg.ts', T), 'https://cdn.example/seg.ts');
    assert.equal(withToken('//cdn.example/seg.ts', T), '//cdn.example/seg.ts');
    assert.equal(withToken('seg.ts?v=2', T), `seg.ts?v=2&jwt=${T}`);
    assert.equal(withToken('/media/asset/x/hls/seg.ts', T), `/media/asset/x/hls/seg.ts?jwt=${T}`);
    assert.equal(withToken('thumbs.jpg#xywh=0,0,10,10', T), `thumbs.jpg?jwt=${T}#xywh=0,0,10,10`);
  });
});

describe('tokenizeStoryboard', () => {
  it('adds the token to every sprite image of the storyboard as the pipeline writes it, keeping the fragment', () => {
    const plan: StoryboardPlan = {
      ...{ count: 3, intervalMs: 5000, durationMs: 12_000, columns: 2, rows: 1, sheets: 2 },
      ...{ tileWidth: 160, tileHeight: 90, poster: { atSecs: 0, width: 160, height: 90 } },
    };
    const vtt = storyboardVtt(plan);
    const tokenized = tokenizeStoryboard(vtt, T);
    const images = tokenized.split('\n').filter((l) => l.includes('.jpg'));
    assert.deepEqual(images, [
      `${sheetFileName(0)}?jwt=${T}#xywh=0,0,160,90`,
      `${sheetFileName(0)}?jwt=${T}#xywh=160,0,160,90`,
      `${sheetFileName(1)}?jwt=${T}#xywh=0,0,160,90`,
    ]);
    assert.equal(tokenized.replaceAll(`?jwt=${T}`, ''), vtt, 'nothing else changed');
  });

  it('leaves timings, cue text, absolute image URIs and CRLF line ends as they are', () => {
    const vtt =
      'WEBVTT\r\n\r\n1\r\n00:00:00.000 --> 00:00:05.000\r\nthumbs/a.png\r\n\r\n00:00:05.000 --> 00:00:09.000\r\nhttps://cdn.example/b.webp#xywh=1,2,3,4\r\n\r\nNOTE see a.jpg\r\n\r\n00:00:09.000 --> 00:00:10.000\r\nHello there.jpg friend\r\n';
    assert.equal(
      tokenizeStoryboard(vtt, T),
      `WEBVTT\r\n\r\n1\r\n00:00:00.000 --> 00:00:05.000\r\nthumbs/a.png?jwt=${T}\r\n\r\n00:00:05.000 --> 00:00:09.000\r\nhttps://cdn.example/b.webp#xywh=1,2,3,4\r\n\r\nNOTE see a.jpg\r\n\r\n00:00:09.000 --> 00:00:10.000\r\nHello there.jpg friend\r\n`,
    );
  });

  it('is chosen for .vtt keys, the playlist rewrite for .m3u8, none for media files', () => {
    assert.equal(tokenRewriter('asset/p/hls/index.m3u8'), tokenizePlaylist);
    assert.equal(tokenRewriter('asset/p/thumbnails/thumbnails.vtt'), tokenizeStoryboard);
    assert.equal(tokenRewriter('asset/p/hls/216p0/0.ts'), undefined);
    assert.equal(tokenRewriter('asset/p/thumbnails/sprite-0.jpg'), undefined);
  });
});
