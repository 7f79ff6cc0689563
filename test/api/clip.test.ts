// POST /api/clip through the real `livepeer` SDK's stream.createClip (issue #28, spec/API.md
// section C): a clip of an uploaded asset becomes an asset of its own, its duration within one
// frame of the range asked, its first and last frames the source's frames at the range's ends
// (decoded and compared), playable in Chromium; its `clip` task in GET /api/task with
// Livepeer's params.clip and both asset ids; 422s naming the field, another owner's 404.
//
// The H.264 source has a keyframe every second and B-frames, and the range 1.3 s - 3.7 s
// starts and ends between keyframes: the clip is a smart cut (the ends encoded, the GOP of
// 2 s - 3 s copied). A VP9 source is cut by encoding the whole range.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { Livepeer } from 'livepeer';
import { type BrowserPlayer, startBrowserPlayer } from '../helpers/browser.ts';
import { ffprobe, frameAt as frameAtFile, psnr } from '../helpers/media.ts';
import { refused } from '../helpers/sdk.ts';
import { databaseKinds, startTestServer, waitFor, type TestServer } from '../helpers/server.ts';

const run = promisify(execFile);
const FPS = 30;
const FRAME = 1 / FPS;

/** The database whose run also encodes and plays the clips (see the loop). */
const ENCODES_ON = 'embedded';

const work = mkdtempSync(path.join(tmpdir(), 'mediaplane-clip-'));

/** A 6 s testsrc2 clip at 30 fps with a keyframe every second and B-frames (H.264), or VP9 in WebM. */
async function makeSource(codec: 'h264' | 'vp9'): Promise<string> {
  const file = path.join(work, codec === 'h264' ? 'source.mp4' : 'source.webm');
  const args = ['-v', 'error', '-y', '-f', 'lavfi', '-i', `testsrc2=size=320x240:rate=${FPS}`];
  args.push('-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000', '-t', '6', '-pix_fmt', 'yuv420p');
  if (codec === 'h264')
    args.push('-c:v', 'libx264', '-preset', 'veryfast', '-g', '30', '-keyint_min', '30', '-sc_threshold', '0');
  else args.push('-c:v', 'libvpx-vp9', '-deadline', 'realtime', '-cpu-used', '8', '-g', '30', '-b:v', '1M');
  args.push('-c:a', codec === 'h264' ? 'aac' : 'libopus', file);
  await run('ffmpeg', args);
  return file;
}

/** Frame `index` of `file` as a PNG named `name` in this file's folder. */
const frameAt = (file: string, index: number, name: string): Promise<string> =>
  frameAtFile(file, index, path.join(work, `${name}.png`));

async function frameCount(file: string): Promise<number> {
  const { stdout } = await run('ffprobe', [
    ...['-v', 'error', '-select_streams', 'v:0', '-count_frames', '-show_entries', 'stream=nb_read_frames'],
    ...['-of', 'csv=p=0', file],
  ]);
  return Number(stdout.trim());
}

/** The status and error words of an SDK call the server refused. */
async function refusedWith(p: Promise<unknown>): Promise<{ status: number; errors: string[] }> {
  const err = await refused(p);
  return { status: err.statusCode, errors: JSON.parse(err.body).errors };
}

let player: BrowserPlayer | undefined;
let noBrowser = '';
let h264 = '';
let vp9 = '';

before(async () => {
  [h264, vp9] = await Promise.all([makeSource('h264'), makeSource('vp9')]);
  const started = await startBrowserPlayer();
  if ('skip' in started) noBrowser = started.skip;
  else player = started;
});
after(async () => {
  await player?.close();
  rmSync(work, { recursive: true, force: true });
});

for (const { kind, skip } of await databaseKinds()) {
  describe(`POST /api/clip (${kind} database)`, { skip }, () => {
    let server: TestServer;
    let sdk: Livepeer;
    let bob: Livepeer;
    let key = '';
    let source: { id: string; playbackId: string };
    let clip: { id: string; taskId: string };
    let ready: Awaited<ReturnType<typeof assetUntilReady>>;
    let downloaded = '';

    /** GET /api/asset/{id} through the SDK until the asset is ready. */
    const assetUntilReady = (id: string) =>
      waitFor(
        async () => {
          const a = (await sdk.asset.get(id)).asset;
          if (a?.status?.phase === 'failed') assert.fail(`the asset failed: ${a.status.errorMessage}`);
          return a?.status?.phase === 'ready' ? a : undefined;
        },
        120_000,
        `asset ${id} to be ready`,
      );

    /** An asset made by request-upload and a PUT of `file`, ready. */
    const upload = async (file: string, name: string) => {
      const made = (await sdk.asset.create({ name })).data;
      assert.ok(made);
      const put = await fetch(made.url, { method: 'PUT', body: readFileSync(file) });
      assert.ok(put.ok, `PUT answered ${put.status}`);
      const a = await assetUntilReady(made.asset.id);
      return { id: a.id, playbackId: a.playbackId ?? '' };
    };

    before(async () => {
      server = await startTestServer({ database: kind });
      key = await server.key('alice');
      sdk = new Livepeer({ apiKey: key, serverURL: `${server.url}/api` });
      bob = new Livepeer({ apiKey: await server.key('bob'), serverURL: `${server.url}/api` });
      source = await upload(h264, 'source');
    });
    after(() => server.stop());

    it('stream.createClip answers the new asset (source clip) and its task', async () => {
      const res = await sdk.stream.createClip({
        playbackId: source.playbackId,
        startTime: 1300,
        endTime: 3700,
        name: 'the clip',
      });
      assert.equal(res.statusCode, 200);
      const data = res.data;
      assert.ok(data?.task.id);
      assert.equal(data.asset.name, 'the clip');
      assert.deepEqual(data.asset.source, {
        type: 'clip',
        sourceId: source.id,
        playbackId: source.playbackId,
        assetId: source.id,
      });
      assert.notEqual(data.asset.playbackId, source.playbackId);
      assert.equal(data.asset.status?.phase, 'waiting');
      clip = { id: data.asset.id, taskId: data.task.id };
    });

    it("GET /api/task shows the clip task with Livepeer's params.clip and both asset ids", async () => {
      const tasks = (await sdk.task.getAll()).data ?? [];
      const task = tasks.find((t) => t.id === clip.taskId);
      assert.ok(task, 'the clip task is listed');
      assert.equal(task.type, 'clip');
      assert.equal(task.inputAssetId, source.id);
      assert.equal(task.outputAssetId, clip.id);
      assert.deepEqual(task.params?.clip?.clipStrategy, {
        startTime: 1300,
        endTime: 3700,
        playbackId: source.playbackId,
      });
      assert.equal(task.params?.clip?.inputId, source.id);
      // Over plain HTTP: the store key of the source never shows.
      const raw = await server.call('GET', `/api/task/${clip.taskId}`, { key });
      assert.equal(raw.status, 200);
      assert.equal(raw.body.params.clip.clipStrategy.assetId, source.id);
      assert.doesNotMatch(JSON.stringify(raw.body), /\/source"|"key"/);
    });

    it('a range outside the asset, or ending before it starts, is a 422 naming the field', async () => {
      const clipOf = (startTime: number, endTime: number) =>
        refusedWith(sdk.stream.createClip({ playbackId: source.playbackId, startTime, endTime }));
      const past = await clipOf(1000, 6500);
      assert.equal(past.status, 422);
      assert.deepEqual(past.errors, ['endTime: must be within the asset, which is 6000 ms long']);
      const late = await clipOf(7000, 8000);
      assert.equal(late.status, 422);
      assert.ok(
        late.errors.some((e) => e.startsWith('startTime: must be within the asset')),
        late.errors.join(),
      );
      for (const [start, end] of [
        [3000, 2000],
        [2000, 2000],
      ] as const) {
        const backwards = await clipOf(start, end);
        assert.equal(backwards.status, 422);
        assert.deepEqual(backwards.errors, ['endTime: must be greater than startTime']);
      }
      const tiny = await clipOf(1000, 1010);
      assert.equal(tiny.status, 422);
      assert.match(tiny.errors[0] ?? '', /^endTime: the clip must hold at least one frame/);
      const negative = await server.call('POST', '/api/clip', {
        key,
        body: { playbackId: source.playbackId, startTime: -1, endTime: 10 },
      });
      assert.equal(negative.status, 422);
      assert.match(negative.body.errors.join(), /startTime/);
    });

    it('a source that is not ready is a 422 naming playbackId; no task is made', async () => {
      const pending = (await sdk.asset.create({ name: 'never uploaded' })).data;
      assert.ok(pending?.asset.playbackId);
      const before = (await sdk.task.getAll()).data?.length;
      const res = await refusedWith(
        sdk.stream.createClip({ playbackId: pending.asset.playbackId, startTime: 0, endTime: 1000 }),
      );
      assert.equal(res.status, 422);
      assert.deepEqual(res.errors, ['playbackId: the asset is not ready to clip (it is uploading)']);
      assert.equal((await sdk.task.getAll()).data?.length, before);
    });

    it("another owner's playbackId, or an unknown one, is a 404", async () => {
      const theirs = await refusedWith(
        bob.stream.createClip({ playbackId: source.playbackId, startTime: 0, endTime: 1000 }),
      );
      assert.equal(theirs.status, 404);
      const unknown = await refusedWith(
        sdk.stream.createClip({ playbackId: 'nosuchplayback00', startTime: 0, endTime: 1000 }),
      );
      assert.equal(unknown.status, 404);
      assert.equal((await bob.task.getAll()).data?.length ?? 0, 0, 'bob got no task');
    });

    // The cut itself, its frames and its playback: encoding, the same on either database, so
    // it runs on one; the SQL around it (the task, the checks, owners) runs on both.
    if (kind === ENCODES_ON) {
      it('the clip becomes ready: its duration within one frame of the range, by the API and by ffprobe', async () => {
        ready = await assetUntilReady(clip.id);
        const asked = 3.7 - 1.3;
        const duration = ready.videoSpec?.duration ?? 0;
        assert.ok(Math.abs(duration - asked) <= FRAME, `videoSpec.duration ${duration} s for ${asked} s`);
        assert.ok(ready.playbackUrl && ready.downloadUrl);
        downloaded = path.join(work, `clip-${kind}.mp4`);
        writeFileSync(downloaded, Buffer.from(await (await fetch(ready.downloadUrl)).arrayBuffer()));
        const probed = await ffprobe(downloaded);
        const format = Number(probed.format.duration);
        assert.ok(Math.abs(format - asked) <= FRAME, `ffprobe: ${format} s for ${asked} s`);
        assert.equal(await frameCount(downloaded), Math.round(asked * FPS), 'one frame per 1/30 s of the range');
        assert.deepEqual(
          probed.streams.map((s) => s.codec_type),
          ['video', 'audio'],
        );
        // The range is between keyframes: the ends were encoded, the whole GOP copied.
        assert.match(server.logs.text, /"method":"smart"[^\n]*"msg":"clip cut"|"msg":"clip cut"[^\n]*"method":"smart"/);
        const task = (await sdk.task.get(clip.taskId)).task;
        assert.equal(task?.status?.phase, 'completed');
      });

      it("its first and last frames are the source's frames at startTime and just before endTime", async () => {
        // 1.3 s is frame 39 at 30 fps; 3.7 s is frame 111, so the last frame is 110.
        const first = await frameAt(downloaded, 0, `first-${kind}`);
        const at = await psnr(first, await frameAt(h264, 39, `src39-${kind}`));
        assert.ok(at > 40, `the first frame against the source's frame 39: ${at} dB`);
        for (const other of [38, 40]) {
          const off = await psnr(first, await frameAt(h264, other, `src${other}-${kind}`));
          assert.ok(off < at - 10, `frame ${other} is told apart: ${off} dB against ${at} dB`);
        }
        const last = await frameAt(downloaded, Math.round(2.4 * FPS) - 1, `last-${kind}`);
        const end = await psnr(last, await frameAt(h264, 110, `src110-${kind}`));
        assert.ok(end > 40, `the last frame against the source's frame 110: ${end} dB`);
      });

      it('the clip plays in Chromium from its playbackUrl', async (t) => {
        if (!player) return t.skip(noBrowser);
        const played = await player.playHls(ready.playbackUrl ?? '');
        assert.equal(played.error, undefined, played.log.join('\n'));
        assert.ok(played.played > 0.5, `played ${played.played} s`);
        assert.equal(played.videoHeight, 240);
      });

      it('a VP9 source is cut by encoding the range: duration and first frame as asked', async () => {
        const webm = await upload(vp9, 'vp9 source');
        const res = await sdk.stream.createClip({ playbackId: webm.playbackId, startTime: 1300, endTime: 3700 });
        assert.equal(res.data?.asset.name, 'vp9 source (clip)');
        const a = await assetUntilReady(res.data?.asset.id ?? '');
        assert.ok(Math.abs((a.videoSpec?.duration ?? 0) - 2.4) <= FRAME, `videoSpec.duration ${a.videoSpec?.duration}`);
        const file = path.join(work, `vp9-clip-${kind}.mp4`);
        writeFileSync(file, Buffer.from(await (await fetch(a.downloadUrl ?? '')).arrayBuffer()));
        assert.equal(await frameCount(file), 72);
        const first = await psnr(await frameAt(file, 0, `vp9-first-${kind}`), await frameAt(vp9, 39, `vp9-39-${kind}`));
        assert.ok(first > 35, `the first frame against the source's frame 39: ${first} dB`);
        assert.match(
          server.logs.text,
          /"method":"encode"[^\n]*"msg":"clip cut"|"msg":"clip cut"[^\n]*"method":"encode"/,
        );
      });
    }
  });
}
