// Progress a person can watch: a 30 s 720p upload moves through the fetch, the analysis and
// the encode (the HLS segments as they are finished, since ffmpeg prints no progress while
// the storyboard waits for its frames) to ready, in steady steps rather than 15% then done.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { makeClip } from '../helpers/media.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { requestUpload } from '../helpers/uploads.ts';

describe('the progress of an asset while it is processed', () => {
  let server: TestServer;
  let key: string;
  let clip: string;

  before(async () => {
    clip = await makeClip({ width: 1280, height: 720, seconds: 30 });
    // The service's own encode settings (the tests' ultrafast and no analysis would leave too
    // few steps to watch): what a person uploading sees.
    server = await startTestServer({ settings: { x264Preset: 'veryfast', perTitle: true } });
    key = await server.key('alice');
  });

  after(() => server?.stop());

  it('a 30 s 720p upload shows at least six distinct progress values before it is ready', async () => {
    const up = await requestUpload(server.url, key, 'thirty seconds');
    const put = await fetch(up.url, { method: 'PUT', body: readFileSync(clip) });
    assert.ok(put.ok, `PUT answered ${put.status}`);
    const seen: number[] = [];
    const deadline = Date.now() + 300_000;
    for (;;) {
      const { status } = (await server.call('GET', `/api/asset/${up.asset.id}`, { key })).body;
      if (status.phase === 'ready') break;
      assert.notEqual(status.phase, 'failed', status.errorMessage);
      assert.ok(Date.now() < deadline, `not ready in time; progress seen: ${seen.join(', ')}`);
      if (status.phase === 'processing' && typeof status.progress === 'number' && seen.at(-1) !== status.progress)
        seen.push(status.progress);
      await new Promise((r) => setTimeout(r, 150));
    }
    const distinct = [...new Set(seen)];
    assert.ok(distinct.length >= 6, `progress seen: ${seen.join(', ')}`);
    assert.deepEqual(
      seen,
      [...seen].sort((a, b) => a - b),
      'progress never goes back',
    );
  });
});
