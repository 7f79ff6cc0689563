import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { COMPILE_CACHE_ENV } from '../helpers/compile-cache.ts';
import { seedEmbeddedDb } from '../helpers/embedded-template.ts';
import { TEST_ENCODE_ENV } from '../helpers/encode-defaults.ts';
import { sampleSum } from '../helpers/llm.ts';

// The `mediaplane` command as a user runs it: a real process, real exit codes and output.

const BIN = fileURLToPath(new URL('../../bin/mediaplane.js', import.meta.url));
const MODELS = fileURLToPath(new URL('../../../shared/models/', import.meta.url));
const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'mediaplane-cli-'));
  dirs.push(d);
  return d;
};
/** A data dir that starts with a migrated embedded database, as the test servers' do. */
const seededDir = async () => {
  const d = tempDir();
  await seedEmbeddedDb(d);
  return d;
};
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Runs the CLI without blocking this process, so that independent runs overlap. */
function cli(args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, ...COMPILE_CACHE_ENV, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: 60_000,
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on('close', (code) => resolve({ code, stdout, stderr })),
  );
}

describe('mediaplane CLI', () => {
  it('prints usage and per-command help', async () => {
    const commands = ['start', 'api', 'worker', 'keys'];
    const [top, unknown, ...helps] = await Promise.all([
      cli(['--help']),
      cli(['frobnicate']),
      ...commands.map((c) => cli([c, '--help'])),
    ]);
    assert.equal(top?.code, 0);
    for (const c of commands) assert.match(top?.stdout ?? '', new RegExp(`\\n  ${c} `));
    for (const [i, c] of commands.entries()) {
      const h = helps[i];
      assert.equal(h?.code, 0, c);
      assert.match(h?.stdout ?? '', /Usage/);
    }
    assert.match(helps[0]?.stdout ?? '', /MEDIAPLANE_PORT/, 'start --help names the settings');
    assert.equal(unknown?.code, 2);
  });

  it('stops start-up on a bad setting, naming it and the rule', async () => {
    const [r, flag, unknown] = await Promise.all([
      cli(['start'], { MEDIAPLANE_PORT: 'eighty', MEDIAPLANE_DATA_DIR: tempDir() }),
      cli(['api', '--worker-concurrency', '0'], { MEDIAPLANE_DATA_DIR: tempDir() }),
      cli(['api', '--colour', 'blue']),
    ]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /MEDIAPLANE_PORT="eighty": must be a whole number/);
    assert.match(flag.stderr, /--worker-concurrency="0": must be >= 1/);
    assert.match(unknown.stderr, /unknown flag --colour/);
  });

  it('creates, lists and revokes keys with no server running (embedded database)', async () => {
    const env = { MEDIAPLANE_DATA_DIR: await seededDir() };
    const created = await cli(['keys', 'create', '--owner', 'alice'], env);
    assert.equal(created.code, 0, created.stderr);
    const lines = created.stdout.trim().split('\n');
    assert.equal(lines.length, 1, 'the key alone on stdout');
    assert.match(lines[0] ?? '', /^mp_[A-Za-z0-9_-]{32}$/);
    const list = await cli(['keys', 'list', '--json'], env);
    const keys = JSON.parse(list.stdout) as { id: string; owner: string; prefix: string }[];
    assert.equal(keys.length, 1);
    assert.equal(keys[0]?.owner, 'alice');
    assert.ok(!list.stdout.includes(lines[0] ?? '-'), 'list never shows the key');
    assert.equal((await cli(['keys', 'revoke', keys[0]?.id ?? ''], env)).code, 0);
    assert.equal((await cli(['keys', 'revoke', keys[0]?.id ?? ''], env)).code, 1);
  });

  it('creates a key while `mediaplane start` holds the embedded database, and stops gracefully on SIGTERM', async () => {
    const dataDir = await seededDir();
    const env = {
      ...process.env,
      ...COMPILE_CACHE_ENV,
      MEDIAPLANE_DATA_DIR: dataDir,
      MEDIAPLANE_PORT: '0',
      MEDIAPLANE_LOG_LEVEL: 'info',
    };
    const server = spawn(process.execPath, [BIN, 'start'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    server.stdout.on('data', (b: Buffer) => (out += b.toString()));
    const url = await new Promise<string>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`server did not start: ${out}`)), 60_000);
      server.stdout.on('data', () => {
        const m = /"url":"(http:\/\/[^"]+)"/.exec(out);
        if (m?.[1]) {
          clearTimeout(t);
          resolve(m[1]);
        }
      });
    });
    const created = await cli(['keys', 'create', '--owner', 'bob'], { MEDIAPLANE_DATA_DIR: dataDir });
    assert.equal(created.code, 0, created.stderr);
    const key = created.stdout.trim();
    const res = await fetch(`${url}/api/task`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(res.status, 200, 'the running server accepts the key at once');
    server.kill('SIGTERM');
    const code = await new Promise<number | null>((r) => server.once('exit', r));
    assert.equal(code, 0);
    assert.match(out, /shutting down/);
    assert.ok(!out.includes(key), 'the key is never logged');
  });
});

describe('mediaplane start: every role on one port', () => {
  it('queues a transcode and answers chat completions (openai client, non-streaming and streaming)', async () => {
    const dataDir = await seededDir();
    const env = {
      ...process.env,
      ...COMPILE_CACHE_ENV,
      ...TEST_ENCODE_ENV,
      MEDIAPLANE_DATA_DIR: dataDir,
      MEDIAPLANE_PORT: '0',
      MEDIAPLANE_MODELS_DIR: MODELS,
      MEDIAPLANE_ORCHESTRATOR_MODELS: 'stas/tiny-random-llama-2',
      MEDIAPLANE_GATEWAY_POLL_MS: '200',
    };
    const server = spawn(process.execPath, [BIN, 'start'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    server.stdout.on('data', (b: Buffer) => (out += b.toString()));
    server.stderr.on('data', (b: Buffer) => (out += b.toString()));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`server did not start: ${out.slice(-2000)}`)), 90_000);
        server.stdout.on('data', () => {
          const m = /"url":"(http:\/\/[^"]+)"/.exec(out);
          if (m?.[1]) {
            clearTimeout(t);
            resolve(m[1]);
          }
        });
      });
      const key = (await cli(['keys', 'create', '--owner', 'alice'], { MEDIAPLANE_DATA_DIR: dataDir })).stdout.trim();
      const task = await fetch(`${url}/api/transcode`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          input: { url: 'https://example.com/v.mp4' },
          storage: {
            type: 's3',
            endpoint: 'https://s3.example.com',
            bucket: 'b',
            credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
          },
          outputs: { hls: { path: '/hls' } },
        }),
      });
      assert.equal(task.status, 200);
      assert.equal(((await task.json()) as { type: string }).type, 'transcode-file');

      const openai = new OpenAI({ apiKey: key, baseURL: `${url}/v1` });
      // The gateway finds the local orchestrator on its first poll once the server is ready.
      // Seeded: unseeded, the random test model now and then ends (EOS) before max_tokens.
      const chat = await waitForOk(() =>
        openai.chat.completions.create({
          model: 'stas/tiny-random-llama-2',
          messages: [{ role: 'user', content: 'Hello' }],
          max_tokens: 8,
          seed: 1,
        }),
      );
      assert.equal(chat.object, 'chat.completion');
      assert.equal(chat.usage?.completion_tokens, 8);
      assert.equal(chat.choices[0]?.finish_reason, 'length');
      const stream = await openai.chat.completions.create({
        model: 'stas/tiny-random-llama-2',
        messages: [{ role: 'user', content: 'Hello' }],
        max_tokens: 5,
        seed: 1,
        stream: true,
        stream_options: { include_usage: true },
      });
      let text = '';
      let usage: OpenAI.CompletionUsage | undefined | null;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? '';
        usage = chunk.usage ?? usage;
      }
      assert.ok(text.length > 0);
      assert.equal(usage?.completion_tokens, 5);

      // One GET /metrics for every role of the process: the API's, the gateway's, the local orchestrator's.
      // The orchestrator is up once a poll reached it; a poll late on a loaded host marks it down until the next one.
      const metrics = await waitForOk(async () => {
        const text = await (await fetch(`${url}/metrics`)).text();
        assert.equal(sampleSum(text, 'mediaplane_llm_orchestrators', { state: 'up' }), 1);
        return text;
      });
      assert.equal(
        sampleSum(metrics, 'mediaplane_llm_completions_total', {
          model: 'stas/tiny-random-llama-2',
          outcome: 'completed',
        }),
        2,
      );
      assert.equal(sampleSum(metrics, 'mediaplane_llm_tokens_total', { kind: 'completion' }), 8 + 5);
      assert.ok(sampleSum(metrics, 'mediaplane_orchestrator_tokens_computed_total') >= 8 + 5);
      assert.equal(sampleSum(metrics, 'mediaplane_tasks'), 1, 'the one task, whatever its phase');
    } finally {
      server.kill('SIGTERM');
      await new Promise((r) => server.once('exit', r));
    }
  });
});

async function waitForOk<T>(fn: () => Promise<T>, tries = 50): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await fn();
    } catch (err) {
      if (i >= tries) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}
