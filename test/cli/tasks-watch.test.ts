// `mediaplane tasks watch ID` as a user runs it (issue #18): a real process following a real
// server's event stream, its output and exit code. The task is driven through the queue as a
// worker would; each step waits for the line it should draw, so nothing here is timed.

import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseCommandLine, UsageError } from '../../src/cli/args.ts';
import { TASKS_FLAGS, tasksCommand } from '../../src/cli/tasks.ts';
import { loadConfig } from '../../src/config/index.ts';
import { startTestServer, transcodeBody, type TestServer } from '../helpers/server.ts';

const BIN = fileURLToPath(new URL('../../bin/mediaplane.js', import.meta.url));

/** A running `mediaplane` process: its output so far, a wait for a line, its exit code. */
interface Cli {
  stdout(): string;
  stderr(): string;
  /** Resolves once stdout matches `re`. */
  printed(re: RegExp): Promise<void>;
  exit: Promise<number | null>;
}

function cli(args: string[], env: Record<string, string> = {}): Cli {
  const child: ChildProcessWithoutNullStreams = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, MEDIAPLANE_API_KEY: '', ...env },
  });
  let out = '';
  let err = '';
  const waiters: Array<() => void> = [];
  child.stdout.on('data', (b: Buffer) => {
    out += b.toString();
    for (const w of waiters.splice(0)) w();
  });
  child.stderr.on('data', (b: Buffer) => (err += b.toString()));
  const exit = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return {
    stdout: () => out,
    stderr: () => err,
    async printed(re) {
      while (!re.test(out)) {
        const more = new Promise<void>((r) => waiters.push(r));
        const ended = await Promise.race([more.then(() => false), exit.then(() => true)]);
        if (ended && !re.test(out)) assert.fail(`exited before printing ${re}: ${out}${err}`);
      }
    },
    exit,
  };
}

describe('mediaplane tasks watch', () => {
  let server: TestServer;
  let key: string;

  before(async () => {
    server = await startTestServer({ roles: { api: true, worker: false } });
    key = await server.key('alice');
  });
  after(() => server.stop());

  const create = async (): Promise<string> => {
    const res = await server.call('POST', '/api/transcode', { key, body: transcodeBody() });
    assert.equal(res.status, 200);
    return res.body.id as string;
  };
  async function claim(id: string): Promise<void> {
    const rows = await server.running.core.queue.claim('w1', 1);
    assert.deepEqual(
      rows.map((r) => r.id),
      [id],
    );
  }

  it('draws the progress and exits 0 on completion, printing where the outputs are', async () => {
    const id = await create();
    const run = cli(['tasks', 'watch', id, '--url', server.url, '--key', key]);
    await run.printed(/\[\.{10}\]\s+0% waiting\n/);
    await claim(id);
    await run.printed(/0% running\n/);
    await server.running.core.queue.progress(id, 'w1', 0.5);
    await run.printed(/\[#####\.{5}\]\s+50% running\n/);
    await server.running.core.queue.complete(id, 'w1', {
      hls: { path: '/out/hls/index.m3u8' },
      mp4: [{ path: '/out/mp4/360p0.mp4' }, { path: '/out/mp4/720p0.mp4' }],
      input_video: { duration: 1, size: 2 },
    });
    assert.equal(await run.exit, 0, run.stderr());
    assert.match(run.stdout(), /\[#{10}\] 100% completed\n/);
    assert.match(run.stdout(), /^hls +http:\/\/127\.0\.0\.1:9000\/out\/out\/hls\/index\.m3u8$/m);
    assert.match(run.stdout(), /^mp4 +http:\/\/127\.0\.0\.1:9000\/out\/out\/mp4\/720p0\.mp4$/m);
  });

  it('exits 1 on failure, printing the error message (key from MEDIAPLANE_API_KEY)', async () => {
    const id = await create();
    const run = cli(['tasks', 'watch', id, '--url', `${server.url}/api`], { MEDIAPLANE_API_KEY: key });
    await run.printed(/waiting\n/);
    await claim(id);
    await run.printed(/running\n/);
    await server.running.core.queue.fail(id, 'w1', {
      message: 'the input is not a video',
      retryable: false,
      backoffMs: 0,
    });
    assert.equal(await run.exit, 1);
    assert.match(run.stdout(), /failed\n/);
    assert.match(run.stderr(), /failed: the input is not a video/);
  });

  it('exits 1 on a cancel', async () => {
    const id = await create();
    const run = cli(['tasks', 'watch', id, '--url', server.url, '--key', key]);
    await run.printed(/waiting\n/);
    await server.call('POST', `/api/task/${id}/cancel`, { key });
    assert.equal(await run.exit, 1);
    assert.match(run.stderr(), /was cancelled/);
  });

  it("prints the API's message for an unknown task and a bad key (exit 1)", async () => {
    const id = await create();
    const unknown = cli(['tasks', 'watch', '00000000-0000-4000-8000-000000000000', '--url', server.url, '--key', key]);
    assert.equal(await unknown.exit, 1);
    assert.match(unknown.stderr(), /404: not found/);
    const badKey = cli(['tasks', 'watch', id, '--url', server.url, '--key', 'mp_not-a-key']);
    assert.equal(await badKey.exit, 1);
    assert.match(badKey.stderr(), /401: .*API key/i);
  });

  it('exits 2 on a usage error, naming it', async () => {
    const keyless = cli(['tasks', 'watch', 'a']);
    assert.equal(await keyless.exit, 2);
    assert.match(keyless.stderr(), /^mediaplane tasks: .*--key KEY or MEDIAPLANE_API_KEY/);
    // The other refusals in this process (each spawn loads the whole service: seconds).
    const config = loadConfig({ env: {} });
    for (const [argv, message] of [
      [[], /needs watch TASK_ID/],
      [['watch'], /needs one task id/],
      [['watch', 'a', 'b', '--key', 'k'], /needs one task id/],
      [['watch', 'a', '--key', 'k', '--url', 'ftp://x'], /--url: must be an http/],
      [['watch', 'a', '--key', 'k', '--url', 'not a url'], /--url: "not a url" is not a URL/],
    ] as const) {
      const args = parseCommandLine(argv, TASKS_FLAGS);
      await assert.rejects(
        tasksCommand(args, { config }),
        (e: Error) => e instanceof UsageError && message.test(e.message),
      );
    }
  });

  it('redraws one line on a terminal', async () => {
    const id = await create();
    let out = '';
    let wake = () => {};
    const stdout = {
      isTTY: true,
      write: (s: string) => {
        out += s;
        wake();
        return true;
      },
    };
    const args = parseCommandLine(['watch', id, '--url', server.url, '--key', key], TASKS_FLAGS);
    const done = tasksCommand(args, { config: loadConfig({ env: {} }), stdout, stderr: { write: () => true } });
    while (!out.includes('waiting')) await new Promise<void>((r) => (wake = r));
    await server.call('POST', `/api/task/${id}/cancel`, { key });
    assert.equal(await done, 1);
    assert.equal(out, '\r\x1b[2K[..........]   0% waiting\r\x1b[2K[..........]   0% cancelled\n');
  });
});
