// The small pieces of serving a ladder from another node: a playlist written without a query
// gets the viewer's token on every URI (as if written with it), and the file cache keeps the
// most recently used files within its bounds.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FileCache } from '../../src/live/cluster/file-cache.ts';
import { mediaPlaylist, multivariantPlaylist, withUriQuery } from '../../src/live/llhls/playlist.ts';

const SEGMENTS = [
  {
    msn: 10,
    run: 1,
    discontinuity: false,
    programDateTime: 1_700_000_000_000,
    duration: 1,
    complete: true,
    parts: [
      { duration: 0.5, independent: true },
      { duration: 0.5, independent: false },
    ],
  },
  {
    msn: 11,
    run: 2,
    discontinuity: true,
    programDateTime: 1_700_000_001_000,
    duration: 0.5,
    complete: false,
    parts: [{ duration: 0.5, independent: true }],
  },
];

const view = (uriQuery?: string) => ({
  segments: SEGMENTS,
  discontinuitySequence: 0,
  targetDuration: 1,
  partTargetSecs: 0.5,
  ended: false,
  preloadHint: { msn: 11, part: 1 },
  reports: [{ name: '240p0', lastMsn: 11, lastPart: 0 }],
  uriQuery,
});

describe('withUriQuery', () => {
  it('gives a media playlist written without a query the one written with it', () => {
    for (const query of ['jwt=eyJhbGciOi.eyJzdWIi.c2ln', 'jwt=a"b\nc d']) {
      assert.equal(withUriQuery(mediaPlaylist(view()), query), mediaPlaylist(view(query)), query);
    }
  });

  it('gives a multivariant playlist written without a query the one written with it', () => {
    const variants = [
      { name: 'source', bandwidth: 1_000_000, width: 320, height: 240, codecs: 'avc1.64000d,mp4a.40.2' },
      { name: '240p0', bandwidth: 400_000 },
    ];
    assert.equal(
      withUriQuery(multivariantPlaylist(variants), 'jwt=x.y.z'),
      multivariantPlaylist(variants, 'jwt=x.y.z'),
    );
  });

  it('leaves a playlist as it is without a query', () => {
    const text = mediaPlaylist(view());
    assert.equal(withUriQuery(text, undefined), text);
    assert.equal(withUriQuery(text, ''), text);
  });
});

describe('FileCache', () => {
  const file = (bytes: number, fill = 1) => Buffer.alloc(bytes, fill);

  it('drops the least recently used file past its bytes', () => {
    const cache = new FileCache({ maxBytes: 300 });
    cache.set('a', file(100));
    cache.set('b', file(100));
    cache.set('c', file(100));
    assert.ok(cache.get('a'), 'a is used: b is now the oldest');
    cache.set('d', file(100));
    assert.equal(cache.get('b'), undefined);
    for (const key of ['a', 'c', 'd']) assert.ok(cache.get(key), key);
    assert.equal(cache.bytes, 300);
  });

  it('drops the oldest past its count, keeps nothing bigger than itself, and replaces a key', () => {
    const cache = new FileCache({ maxBytes: 1000, maxFiles: 2 });
    cache.set('a', file(10));
    cache.set('b', file(10));
    cache.set('c', file(10));
    assert.equal(cache.get('a'), undefined);
    cache.set('huge', file(1001));
    assert.equal(cache.get('huge'), undefined);
    cache.set('b', file(20, 2));
    assert.equal(cache.get('b')?.[0], 2);
    assert.equal(cache.bytes, 30);
  });
});
