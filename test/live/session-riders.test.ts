import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createLogger } from '../../src/lib/log.ts';
import { LiveRendition } from '../../src/live/llhls/index.ts';
import type { RenditionTap, SessionPlugin } from '../../src/live/session-plugins.ts';
import { SessionRiders } from '../../src/live/session-riders.ts';
import type { StreamRecord } from '../../src/live/types.ts';
import { LogCapture } from '../helpers/server.ts';

// The plug-ins riding along a session: each made once with the session's view, told of each
// rendition (with a tap that reaches it), of the publisher's end and of the session's end
// (once); one that throws is logged and left out, the others go on.

const TIMING = { partTargetSecs: 0.25, segmentTargetSecs: 1, windowSecs: 30 };

test('plug-ins are made per session, told of renditions, the publish end and the end once; a failing one is left out', async () => {
  const logs = new LogCapture();
  const log = createLogger({ level: 'info', destination: logs });
  const heard: string[] = [];
  const taps: RenditionTap[] = [];
  const good = (): SessionPlugin => ({
    rendition: (name, tap) => {
      heard.push(`rendition ${name}`);
      const t = { init: () => heard.push('init'), part: () => {}, end: () => heard.push('tap end') };
      taps.push(t);
      tap(t);
    },
    publishEnded: () => heard.push('publish ended'),
    end: async () => void heard.push('end'),
  });
  const broken = (): SessionPlugin => ({
    rendition: () => {
      throw new Error('broken plug-in');
    },
    end: async () => {
      throw new Error('broken end');
    },
  });
  const views: unknown[] = [];
  const riders = new SessionRiders(
    [
      (v) => {
        views.push(v);
        return good();
      },
      broken,
      () => undefined,
      () => {
        throw new Error('broken factory');
      },
    ],
    { stream: { id: 's1' } as StreamRecord, sessionId: 'session-1', continued: true, log },
  );
  assert.equal(views.length, 1);
  assert.deepEqual((views[0] as { continued: boolean }).continued, true);
  const r = new LiveRendition({ name: 'source', timing: TIMING });
  riders.rendition(r);
  riders.publishEnded();
  r.end();
  await riders.end();
  await riders.end();
  assert.deepEqual(heard, ['rendition source', 'publish ended', 'tap end', 'end']);
  assert.equal(taps.length, 1);
  assert.match(logs.text, /a session plug-in failed/);
  assert.match(logs.text, /a session plug-in failed to end/);
});
