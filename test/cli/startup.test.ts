import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

// A server command that cannot start says why in one line on stderr, naming the setting to
// change, and exits non-zero: no Node stack trace on the terminal (its stack is in the log at
// debug). The case a person meets first: a second `mediaplane start` on a port in use.

const BIN = fileURLToPath(new URL('../../bin/mediaplane.js', import.meta.url));
const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'mediaplane-startup-'));
  dirs.push(d);
  return d;
};

let held: Server;
let port = 0;

before(async () => {
  held = createServer();
  await new Promise<void>((resolve) => held.listen(0, '127.0.0.1', resolve));
  const address = held.address();
  port = typeof address === 'object' && address ? address.port : 0;
});

after(async () => {
  await new Promise((resolve) => held?.close(resolve));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The CLI as a person runs it, to its exit. */
function cli(args: string[], env: Record<string, string>): Promise<Run> {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, MEDIAPLANE_LOG_FORMAT: 'json', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) =>
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    }),
  );
}

const STACK_FRAME = /^\s+at /m;

describe('start-up failures', () => {
  it('a second start on a port in use: one line naming MEDIAPLANE_PORT, no stack trace, exit 2', async () => {
    const run = await cli(['start'], { MEDIAPLANE_PORT: String(port), MEDIAPLANE_DATA_DIR: tempDir() });
    assert.equal(run.code, 2, run.stderr);
    const lines = run.stderr.trim().split('\n');
    assert.equal(lines.length, 1, run.stderr);
    assert.match(lines[0] ?? '', new RegExp(`^mediaplane start: port ${port} on 127\\.0\\.0\\.1 is in use`));
    assert.match(lines[0] ?? '', /MEDIAPLANE_PORT \(or --port\)/);
    assert.doesNotMatch(run.stderr + run.stdout, STACK_FRAME);
    assert.doesNotMatch(run.stderr + run.stdout, /EADDRINUSE/);
  });

  it('an RTMP port in use names MEDIAPLANE_RTMP_PORT and how to turn RTMP ingest off; exit 2', async () => {
    const run = await cli(['ingest'], {
      MEDIAPLANE_PORT: '0',
      MEDIAPLANE_RTMP_PORT: String(port),
      MEDIAPLANE_SRT_PORT: '0',
      MEDIAPLANE_DATA_DIR: tempDir(),
    });
    assert.equal(run.code, 2, run.stderr);
    const lines = run.stderr.trim().split('\n');
    assert.equal(lines.length, 1, run.stderr);
    assert.match(lines[0] ?? '', new RegExp(`^mediaplane ingest: port ${port} on 127\\.0\\.0\\.1 is in use`));
    assert.match(lines[0] ?? '', /MEDIAPLANE_RTMP_PORT \(or --rtmp-port\); 0 turns RTMP ingest off/);
    assert.doesNotMatch(run.stderr + run.stdout, STACK_FRAME);
  });

  it('at debug the same one line, and the stack in the log', async () => {
    const run = await cli(['api'], {
      MEDIAPLANE_PORT: String(port),
      MEDIAPLANE_DATA_DIR: tempDir(),
      MEDIAPLANE_LOG_LEVEL: 'debug',
    });
    assert.equal(run.code, 2);
    assert.equal(run.stderr.trim().split('\n').length, 1, run.stderr);
    assert.match(run.stderr, /^mediaplane api: port \d+ .*MEDIAPLANE_PORT/);
    const logged = run.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { level: number; msg: string; err?: { stack?: string } });
    const failure = logged.find((l) => l.msg === 'start-up failed');
    assert.equal(failure?.level, 20, 'at debug');
    assert.match(failure?.err?.stack ?? '', /EADDRINUSE[\s\S]*\n\s+at /);
  });

  it('an unexpected failure is one line too, saying how to see its stack; exit 1', async () => {
    const file = join(tempDir(), 'a-file');
    writeFileSync(file, '');
    const run = await cli(['worker'], { MEDIAPLANE_DATA_DIR: join(file, 'data') });
    assert.equal(run.code, 1, run.stderr);
    const lines = run.stderr.trim().split('\n');
    assert.equal(lines.length, 1, run.stderr);
    assert.match(
      lines[0] ?? '',
      /^mediaplane worker: could not start: .+ \(MEDIAPLANE_LOG_LEVEL=debug logs its stack trace\)$/,
    );
    assert.doesNotMatch(run.stderr + run.stdout, STACK_FRAME);
  });
});
