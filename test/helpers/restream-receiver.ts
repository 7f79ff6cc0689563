import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { sleep } from './sleep.ts';

// A restream target for tests, as another platform's ingest would take it: ffmpeg listening
// for one RTMP publish (`-listen 1`, into an FLV file) or one SRT caller (listener mode, into
// MPEG-TS), copying what it gets. Killed when the test file ends if still running; `kill()`
// drops it mid-stream (a dead target), and a new receiver on the same port is the target
// coming back.

export interface RestreamReceiver {
  port: number;
  /** rtmp://127.0.0.1:PORT/live/KEY: the url a target is given. */
  url: string;
  file: string;
  /** Bytes written to the file so far (0 until media came). */
  bytes(): Promise<number>;
  /** Resolves once `minBytes` of media are in the file; rejects after `timeoutMs`. */
  receiving(o?: { minBytes?: number; timeoutMs?: number }): Promise<number>;
  kill(): void;
  exited: Promise<void>;
}

const KEY = 'target-secret-key-0123456789';

export async function startRtmpReceiver(port: number, o: { key?: string } = {}): Promise<RestreamReceiver> {
  const url = `rtmp://127.0.0.1:${port}/live/${o.key ?? KEY}`;
  return startReceiver({ port, url, input: ['-listen', '1', '-i', url], format: 'flv' });
}

/** The same for SRT: ffmpeg in listener mode taking MPEG-TS (the SRT draft's payload), into a .ts file. */
export async function startSrtReceiver(port: number, o: { streamId?: string } = {}): Promise<RestreamReceiver> {
  const url = `srt://127.0.0.1:${port}?streamid=${o.streamId ?? KEY}`;
  return startReceiver({ port, url, input: ['-i', `srt://127.0.0.1:${port}?mode=listener`], format: 'mpegts' });
}

async function startReceiver(o: {
  port: number;
  url: string;
  input: string[];
  format: string;
}): Promise<RestreamReceiver> {
  const { port, url } = o;
  const dir = await mkdtemp(join(tmpdir(), 'restream-receiver-'));
  const file = join(dir, `received.${o.format === 'flv' ? 'flv' : 'ts'}`);
  // Written packet by packet (-flush_packets): the file's size says when media came.
  const args = [
    ...['-hide_banner', '-loglevel', 'error', '-nostdin', ...o.input],
    ...['-c', 'copy', '-flush_packets', '1', '-f', o.format, '-y', file],
  ];
  const child: ChildProcess = spawn('ffmpeg', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  child.stderr?.resume();
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const kill = (): void => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  after(async () => {
    kill();
    await exited;
    await rm(dir, { recursive: true, force: true });
  });
  const bytes = async (): Promise<number> => (await stat(file).catch(() => ({ size: 0 }))).size;
  const receiving = async (r: { minBytes?: number; timeoutMs?: number } = {}): Promise<number> => {
    const until = Date.now() + (r.timeoutMs ?? 10_000);
    for (;;) {
      const size = await bytes();
      if (size >= (r.minBytes ?? 20_000)) return size;
      if (Date.now() > until) throw new Error(`the receiver on port ${port} got ${size} bytes`);
      await sleep(100);
    }
  };
  // ffmpeg listens once it has parsed its arguments; a publisher that comes earlier is refused.
  await sleep(300);
  return { port, url, file, bytes, receiving, kill, exited };
}
