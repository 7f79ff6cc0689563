// Stream keys never reach a log line, in whatever form a publisher or an error carries them:
// a field named like a key, an RTMP publish URL (the key is its last path segment), an SRT
// URL's streamid, a `streamKey=` pair or a JSON member inside a message.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLogger } from '../../src/lib/log.ts';
import { LogCapture } from '../helpers/server.ts';

const KEY = 'k3y9ab-zz81qa-0pp1ee-xx42nm';

describe('the logger censors stream keys', () => {
  it('in fields, RTMP and SRT URLs, name=value pairs and JSON inside messages', () => {
    const out = new LogCapture();
    const log = createLogger({ level: 'debug', destination: out });
    log.info({ streamKey: KEY, stream: { stream_key: KEY } }, 'a stream');
    log.info(`ffmpeg publishes to rtmp://127.0.0.1:1935/live/${KEY}`);
    log.info(`ffmpeg publishes to rtmps://ingest.example/live/${KEY} now`);
    log.info(`srt://127.0.0.1:2935?streamid=${KEY}&latency=200`);
    log.info(`the relay read streamid=${KEY} from the handshake`);
    log.warn(`refused streamKey=${KEY}`);
    log.error(new Error(`bad body {"streamKey":"${KEY}"}`), 'a failure');
    assert.equal(out.lines.length, 7);
    for (const line of out.lines) assert.ok(!line.includes(KEY), `a key in: ${line}`);
    assert.match(out.text, /rtmp:\/\/127\.0\.0\.1:1935\/live\/\*\*\*/, 'the URL stays readable');
  });

  it('leaves an ingest URL without a key as it is', () => {
    const out = new LogCapture();
    createLogger({ level: 'debug', destination: out }).info('publish to rtmp://127.0.0.1:1935/live');
    assert.match(out.text, /rtmp:\/\/127\.0\.0\.1:1935\/live"/);
  });
});
