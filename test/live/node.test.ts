import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KeyLimits } from '../../src/accounts/index.ts';
import { RateLimitedError } from '../../src/lib/errors.ts';
import { createLogger } from '../../src/lib/log.ts';
import type { PublishAttempt, PublishDecision } from '../../src/live/ingest-types.ts';
import { LiveNode, type LiveNodeConfig, type PublishCounting } from '../../src/live/node.ts';
import type { SessionRecord, StreamRecord } from '../../src/live/types.ts';
import { LogCapture } from '../helpers/server.ts';

// The publish gate without a listener or a database: a store and accounts that keep what they
// are asked, so the order of the checks and what each refusal says are seen.

const CONFIG: LiveNodeConfig = {
  ffmpegPath: 'ffmpeg',
  host: '127.0.0.1',
  ingestHost: undefined,
  rtmpPort: 0,
  srtPort: 0,
  liveMaxStreams: 8,
  liveCpuCapacity: 64,
  liveSegmentSecs: 1,
  livePartSecs: 0.25,
  liveWindowSecs: 30,
  liveIdleTimeoutMs: 10_000,
  liveReconnectSecs: 0,
};

const LIMITED = { requestsPerMinute: 1, tokensPerMinute: null } as unknown as KeyLimits;

function stream(id: string, over: Partial<StreamRecord> = {}): StreamRecord {
  return {
    id,
    owner: 'alice',
    keyId: `key-${id}`,
    playbackId: `play-${id}`,
    profiles: [],
    suspended: false,
    ...over,
  } as StreamRecord;
}

function harness(streams: Record<string, StreamRecord>, limited: Set<string>) {
  const counted: string[] = [];
  const admitted: string[] = [];
  const idle: string[] = [];
  const accounts: PublishCounting = {
    limiter: {
      count: (k) => void counted.push(k.keyId),
      admit: async (k) => {
        admitted.push(k.keyId);
        if (admitted.filter((id) => id === k.keyId).length > 1)
          throw new RateLimitedError('rate limit reached: this key may make 1 requests per minute; try again in 42 s', {
            kind: 'requests',
            windows: { requests: { limit: 1, remaining: 0, resetMs: 42_000 } },
          });
      },
    },
    keyView: async (_owner, id) => ({ limits: limited.has(id) ? LIMITED : undefined }),
  };
  const logs = new LogCapture();
  const node = new LiveNode({
    config: CONFIG,
    log: createLogger({ level: 'info', destination: logs }),
    store: {
      findByKey: async (key) => streams[key],
      claim: async (c) => ({ claimed: true, session: { id: c.sessionId } as SessionRecord, continued: false }),
      report: async () => {},
      idle: async (k) => void idle.push(k.streamId),
      end: async (k) => ({ id: k.sessionId }) as SessionRecord,
    },
    accounts,
  });
  const cuts: string[] = [];
  const publish = (streamKey: string): Promise<PublishDecision> => {
    const attempt: PublishAttempt = {
      protocol: 'rtmp',
      streamKey,
      remote: '127.0.0.1:1',
      disconnect: (reason) => {
        cuts.push(reason);
        if (decisions.get(attempt)?.accepted) setImmediate(() => sinkOf(decisions.get(attempt))?.ended('cut', reason));
      },
    };
    return node.gate(attempt).then((d) => {
      decisions.set(attempt, d);
      return d;
    });
  };
  const decisions = new Map<PublishAttempt, PublishDecision>();
  return { node, publish, counted, admitted, idle, cuts, logs };
}

function sinkOf(d: PublishDecision | undefined) {
  return d?.accepted ? d.sink : undefined;
}

function refusal(d: PublishDecision): string {
  return d.accepted ? 'accepted' : `${d.code}: ${d.description}`;
}

test('the gate: unknown and suspended keys, already live, the key rate; a publish is one request of the stream key', async () => {
  const h = harness(
    {
      'sk-a': stream('a'),
      'sk-b': stream('b', { suspended: true }),
      'sk-c': stream('c'),
      'sk-d': stream('d'),
    },
    new Set(['key-c', 'key-d']),
  );
  assert.match(refusal(await h.publish('nope')), /^BadName: no stream has this stream key/);
  assert.match(refusal(await h.publish('sk-b')), /^BadName: this stream is suspended/);
  assert.equal(refusal(await h.publish('sk-a')), 'accepted');
  assert.deepEqual(h.counted, ['key-a'], 'an unlimited key: the publish is counted as a request');
  assert.match(refusal(await h.publish('sk-a')), /^Rejected: this stream is already live from another publisher$/);
  assert.ok(h.node.ladder('play-a'), 'the accepted stream plays here');

  // A key with an rpm: its first publish passes, the next one in the window is refused with the words.
  assert.equal(refusal(await h.publish('sk-c')), 'accepted');
  const over = refusal(await h.publish('sk-d'));
  assert.equal(over, 'accepted', 'another key has its own window');
  assert.equal(h.node.live, 3);
  assert.ok(h.node.terminate('c', 'terminated by its owner'));
  for (let i = 0; i < 100 && h.node.live > 2; i++) await new Promise((r) => setTimeout(r, 20));
  assert.equal(h.node.live, 2);
  const again = refusal(await h.publish('sk-c'));
  assert.match(again, /^Rejected: the API key that made this stream is over its request rate \(rate limit reached/);
  assert.equal(h.node.live, 2, 'a refusal leaves nothing behind');
  assert.equal(h.node.terminate('nope', 'x'), false);

  await h.node.close();
  assert.deepEqual(h.cuts, ['terminated by its owner', 'the server is shutting down', 'the server is shutting down']);
  assert.deepEqual(h.idle.sort(), ['a', 'c', 'd']);
  assert.match(refusal(await h.publish('sk-a')), /^Rejected: this node is shutting down/);
  for (const key of ['sk-a', 'sk-c', 'sk-d']) assert.ok(!h.logs.text.includes(key), 'a stream key was logged');
});
