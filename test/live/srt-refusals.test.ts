import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { flowing, KEY, probeFlv, publish, startRelay } from './srt-harness.ts';

const run = promisify(execFile);

// What the SRT relay refuses or cuts off, with real ffmpeg publishers: a wrong key and a
// reader are rejected in the handshake before any process starts; HEVC, which ffmpeg 5.1
// cannot put in FLV, ends the publish as refused; a publisher gone silent is cut off.

test('a wrong stream key is rejected in the handshake: no remux starts, the key is in no log line', async (t) => {
  const h = await startRelay(t);
  const wrong = 'wrongkey-fedcba9876543210';
  const pub = publish(t, { port: h.relay.port, streamId: wrong, seconds: 4 });
  const { code, stderr } = await pub.exited;
  assert.notEqual(code, 0);
  assert.match(stderr, /reject/i);
  assert.equal(h.attempts.length, 1, 'the gate is asked once, not for each repeated conclusion');
  assert.equal(h.ends.length, 0);
  assert.equal(h.relay.remuxStarts, 0);
  assert.equal(await h.remuxProcesses(), 0);
  const refusal = h.logs.find((l) => l.includes('srt: publish refused'));
  assert.ok(refusal, h.logs.join(''));
  assert.equal(JSON.parse(refusal).srtReason, 1403);
  assert.match(refusal, /no stream has this key/);
  assert.ok(!h.logs.join('').includes(wrong), 'the key is in a log line');
});

test('a caller that asks to read (m=request) is rejected before the gate is asked', async (t) => {
  const h = await startRelay(t);
  const pub = publish(t, { port: h.relay.port, streamId: `#!::r=${KEY},m=request`, seconds: 4 });
  const { code, stderr } = await pub.exited;
  assert.notEqual(code, 0);
  assert.match(stderr, /reject/i);
  assert.equal(h.attempts.length, 0);
  assert.equal(await h.remuxProcesses(), 0);
  const refusal = h.logs.find((l) => l.includes('srt: publish refused'));
  assert.equal(JSON.parse(refusal ?? '{}').srtReason, 1405);
  assert.ok(!h.logs.join('').includes(KEY), 'the key is in a log line');
});

test('HEVC over SRT ends the publish as refused, saying to send H.264', async (t) => {
  const h = await startRelay(t);
  const pub = publish(t, { port: h.relay.port, streamId: KEY, seconds: 10, hevc: true });
  while (h.ends.length === 0) await new Promise((r) => setTimeout(r, 50));
  const ended = await h.ends[0];
  assert.equal(ended?.kind, 'refused');
  assert.match(ended?.reason ?? '', /^HEVC over SRT is not supported: send H\.264/);
  // Told to stop, the publisher fails before its 10 s are over (a publish that ran out exits 0).
  const { code } = await pub.exited;
  assert.notEqual(code, 0);
});

test('a publisher that goes silent is cut off after the idle timeout, its FLV kept', async (t) => {
  const h = await startRelay(t, { idleTimeoutMs: 1500 });
  const pub = publish(t, { port: h.relay.port, streamId: KEY, seconds: 14 });
  await flowing(h, 0, 20_000);
  pub.child.kill('SIGKILL');
  const ended = await h.ends[0];
  assert.equal(ended?.kind, 'cut');
  assert.match(ended?.reason ?? '', /^the publisher sent nothing for \d+ s$/);
  const flv = await probeFlv(ended?.file ?? '');
  assert.deepEqual(flv.codecs, ['aac', 'h264']);
  assert.equal(h.relay.sessions, 0);
});

test('an encrypted publish (a passphrase) is rejected as such before the gate is asked', async (t) => {
  const h = await startRelay(t);
  const pub = publish(t, { port: h.relay.port, streamId: KEY, seconds: 4, passphrase: 'a-passphrase-of-ours' });
  const { code, stderr } = await pub.exited;
  assert.notEqual(code, 0);
  assert.match(stderr, /reject/i);
  assert.equal(h.attempts.length, 0);
  const refusal = h.logs.find((l) => l.includes('srt: publish refused'));
  assert.equal(JSON.parse(refusal ?? '{}').srtReason, 11, 'SRT_REJ_UNSECURE');
});

test('past the bound of handshakes waiting for the gate, a publisher is rejected as overload', async (t) => {
  const h = await startRelay(t, { maxPending: 1, gateDelayMs: 1500 });
  const first = publish(t, { port: h.relay.port, streamId: KEY, seconds: 3 });
  while (h.attempts.length === 0) await new Promise((r) => setTimeout(r, 20));
  const second = publish(t, { port: h.relay.port, streamId: KEY, seconds: 3 });
  const refused = await second.exited;
  assert.notEqual(refused.code, 0);
  assert.match(refused.stderr, /reject/i);
  const refusal = h.logs.find((l) => l.includes('srt: publish refused'));
  assert.equal(JSON.parse(refusal ?? '{}').srtReason, 1402);
  assert.equal((await first.exited).code, 0);
  assert.equal((await h.ends[0])?.kind, 'left');
  assert.equal(h.attempts.length, 1);
});

test('a remux that never listens: the publisher is rejected, the sink ends as cut, the process is stopped', async (t) => {
  const h = await startRelay(t, { ffmpeg: 'exec sleep 30' });
  const pub = publish(t, { port: h.relay.port, streamId: KEY, seconds: 4 });
  const { code, stderr } = await pub.exited;
  assert.notEqual(code, 0);
  assert.match(stderr, /reject/i);
  const ended = await h.ends[0];
  assert.equal(ended?.kind, 'cut');
  assert.match(ended?.reason ?? '', /^the remux did not answer within \d+ ms$/);
  assert.equal(await h.remuxProcesses(), 1);
  assert.equal(h.relay.sessions, 0);
  const { stdout } = await run('ps', ['-o', 'args=', '--ppid', String(process.pid)]).catch(() => ({ stdout: '' }));
  assert.ok(!stdout.includes('sleep 30'), stdout);
});
