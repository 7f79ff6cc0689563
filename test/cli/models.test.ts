// `mediaplane models pull|list|rm` as a user runs it (a real process) against a hub on port 0
// that answers as huggingface.co does (test/helpers/model-hub.ts): the file chosen by
// quantization and named, a download cut at 40% resumed with a Range from where the .part
// ended (in the same run, and in the next one), a resume with wrong bytes refused with its
// sha256 and nothing installed, and the pulled model offered by the service and answering
// POST /v1/chat/completions; an absent warm model fetched by the service as it starts, the same
// way. Also the start banner's words when there is no model.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startBanner } from '../../src/cli/banner.ts';
import { COMPILE_CACHE_ENV } from '../helpers/compile-cache.ts';
import { type FakeHub, startFakeHub } from '../helpers/model-hub.ts';
import { MODELS_DIR, STORIES } from '../helpers/llm.ts';
import { startTestServer } from '../helpers/server.ts';

const BIN = fileURLToPath(new URL('../../bin/mediaplane.js', import.meta.url));
/** The smallest shared test model, served by the fake hub under two quantization names. */
const SOURCE = join(MODELS_DIR, STORIES, 'stories260K.gguf');
const BYTES = readFileSync(SOURCE);
const SHA256 = createHash('sha256').update(BYTES).digest('hex');
const MODEL = 'acme/stories-GGUF';
const Q4 = 'stories260K-Q4_K_M.gguf';
const Q8 = 'stories260K-Q8_0.gguf';

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'mediaplane-models-'));
  dirs.push(d);
  return d;
}

/** Runs the CLI without blocking this process (the hub answers from it). */
function cli(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, ...COMPILE_CACHE_ENV, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

let hub: FakeHub;
before(async () => {
  hub = await startFakeHub([{ id: MODEL, files: { [Q8]: SOURCE, [Q4]: SOURCE } }]);
});
after(async () => {
  await hub.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function envFor(root: string): Record<string, string> {
  return {
    MEDIAPLANE_MODEL_HUB_URL: hub.url,
    MEDIAPLANE_MODELS_DIR: join(root, 'models'),
    MEDIAPLANE_DATA_DIR: join(root, 'data'),
  };
}

describe('mediaplane models pull', () => {
  it('resumes a download cut at 40% with a Range from where the .part ended, verifies it, and the service answers with it', async () => {
    const root = tempDir();
    const env = envFor(root);
    const folder = join(root, 'models', MODEL);
    hub.ranges.length = 0;
    hub.cutFirstAt = 0.4;
    // The .part as the resumed request arrives (the client may not have written every byte the
    // server sent before the cut: a fetch body drops what it held unread when its socket breaks).
    let partEnd = -1;
    hub.onContent = (range) => {
      if (range) partEnd = statSync(join(folder, `${Q4}.part`)).size;
    };
    const pulled = await cli(['models', 'pull', MODEL], env);
    hub.onContent = undefined;
    assert.equal(pulled.code, 0, pulled.stderr);
    assert.equal(hub.cutAfter, Math.floor(BYTES.length * 0.4));
    assert.ok(partEnd > 0 && partEnd <= (hub.cutAfter ?? 0), `the .part held ${partEnd} bytes`);
    assert.deepEqual(hub.ranges, [undefined, `bytes=${partEnd}-`], 'one cut request, then the rest from the .part end');
    assert.match(pulled.stdout, new RegExp(`File: ${Q4} \\(1\\.2 MB; the default choice\\)`), 'says which file');
    assert.match(pulled.stdout, /Download cut at \d+(\.\d)? kB \(.+\): resuming in \d\.\d s/);
    assert.match(pulled.stdout, new RegExp(`Verifying sha256 ${SHA256}`));
    assert.deepEqual(readdirSync(folder), [Q4], 'the file alone, no .part left');
    assert.ok(readFileSync(join(folder, Q4)).equals(BYTES));

    const [listed, again] = await Promise.all([cli(['models', 'list'], env), cli(['models', 'pull', MODEL], env)]);
    assert.equal(listed.code, 0);
    assert.match(listed.stdout, new RegExp(`^${MODEL}  ${Q4}  1\\.2 MB$`, 'm'));
    assert.match(again.stdout, /is already installed/);
    assert.equal(hub.ranges.length, 2, 'nothing downloaded again');

    // `mediaplane start` with the same model directory offers it, and it answers.
    const server = await startTestServer({
      roles: { api: true, worker: false, gateway: true, orchestrator: true },
      settings: { modelsDir: join(root, 'models'), llmGpu: 'cpu', maxNumSeqs: 2, logLevel: 'warn' },
    });
    try {
      const key = await server.key('models-test');
      const res = await server.call('POST', '/v1/chat/completions', {
        key,
        body: { model: MODEL, messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 8, seed: 1 },
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const body = res.body as { model: string; choices: Array<{ message: { content: string } }> };
      assert.equal(body.model, MODEL);
      assert.ok(body.choices[0]?.message.content, 'the pulled model wrote text');
    } finally {
      await server.stop();
    }

    const removed = await cli(['models', 'rm', MODEL], env);
    assert.equal(removed.code, 0, removed.stderr);
    assert.ok(!existsSync(join(root, 'models', 'acme')), 'the model and its empty org folder are gone');
    const empty = await cli(['models', 'list'], env);
    assert.match(empty.stdout, /No models in .*\.\/mediaplane models pull Qwen\/Qwen2\.5-0\.5B-Instruct-GGUF/);
    assert.equal((await cli(['models', 'rm', MODEL], env)).code, 1);
  });

  it('goes on from the .part an earlier run left, and takes the quantization asked', async () => {
    const root = tempDir();
    const folder = join(root, 'models', MODEL);
    mkdirSync(folder, { recursive: true });
    const left = Math.floor(BYTES.length * 0.3);
    writeFileSync(join(folder, `${Q8}.part`), BYTES.subarray(0, left));
    const listed = await cli(['models', 'list'], envFor(root));
    assert.match(
      listed.stdout,
      /unfinished download \(355\.6 kB\): \.\/mediaplane models pull acme\/stories-GGUF resumes it/,
    );
    hub.ranges.length = 0;
    const pulled = await cli(['models', 'pull', MODEL, '--quantization', 'q8_0'], envFor(root));
    assert.equal(pulled.code, 0, pulled.stderr);
    assert.deepEqual(hub.ranges, [`bytes=${left}-`]);
    assert.match(pulled.stdout, new RegExp(`File: ${Q8} .*matches q8_0`));
    assert.match(pulled.stdout, /Resuming an earlier download from 355\.6 kB/);
    assert.ok(readFileSync(join(folder, Q8)).equals(BYTES));
  });

  it('refuses a resume with wrong bytes: sha256 mismatch, nothing installed, exit 1', async () => {
    const root = tempDir();
    hub.ranges.length = 0;
    hub.cutFirstAt = 0.4;
    hub.corruptRanges = true;
    try {
      const pulled = await cli(['models', 'pull', MODEL], envFor(root));
      assert.equal(pulled.code, 1);
      assert.equal(hub.ranges.length, 2, 'the cut request and the (corrupt) resumed one');
      assert.match(
        pulled.stderr,
        new RegExp(
          `^mediaplane models pull: ${Q4} failed verification \\(sha256 mismatch: got [0-9a-f]{64}, the hub says ${SHA256}\\): it was not installed`,
          'm',
        ),
      );
      assert.deepEqual(
        readdirSync(join(root, 'models', MODEL)),
        [],
        'no model file and no .part to resume bad bytes from',
      );
      assert.match((await cli(['models', 'list'], envFor(root))).stdout, /No models in/);
    } finally {
      hub.corruptRanges = false;
    }
  });

  it('says so when the model is not on the hub, or the quantization is not there', async () => {
    const root = tempDir();
    const [missing, q, bad] = await Promise.all([
      cli(['models', 'pull', 'acme/nothing'], envFor(root)),
      cli(['models', 'pull', MODEL, '--quantization', 'Q2_K'], envFor(root)),
      cli(['models', 'pull', 'not a model'], envFor(root)),
    ]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /model acme\/nothing is not on the model hub http:\/\/127\.0\.0\.1:\d+/);
    assert.equal(q.code, 1);
    assert.match(q.stderr, new RegExp(`no GGUF file matching Q2_K; it has: ${Q8}, ${Q4}`));
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /is not a model name: ORG\/NAME/);
  });
});

describe('an absent warm model', () => {
  it('is downloaded as the service starts by the same path: resumed when cut, verified, then served', async () => {
    const root = tempDir();
    hub.ranges.length = 0;
    hub.cutFirstAt = 0.4;
    const server = await startTestServer({
      roles: { api: false, worker: false, gateway: true, orchestrator: true },
      settings: {
        modelsDir: join(root, 'models'),
        orchestratorModels: [MODEL],
        modelHubUrl: hub.url,
        llmGpu: 'cpu',
        maxNumSeqs: 2,
        logLevel: 'info',
      },
    });
    try {
      assert.equal(hub.ranges.length, 2, 'the cut request and the resumed one');
      assert.match(hub.ranges[1] ?? '', /^bytes=\d+-$/);
      assert.ok(readFileSync(join(root, 'models', MODEL, Q4)).equals(BYTES));
      assert.match(server.logs.text, /download cut: resuming/);
      const res = await server.call('POST', '/v1/chat/completions', {
        key: await server.key('warm'),
        body: { model: MODEL, messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 4 },
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
    } finally {
      await server.stop();
    }
  });
});

describe('the start banner without a model', () => {
  const banner = (models: string[] | undefined) =>
    startBanner({
      version: '1.0.0',
      url: 'http://127.0.0.1:8080',
      roles: { api: true, worker: true, gateway: true, orchestrator: true },
      config: {
        dataDir: '/data',
        databaseUrl: undefined,
        storeUrl: undefined,
        storeEndpoint: undefined,
        modelsDir: '/m',
        orchestratorEngine: 'llama.cpp',
        vllmUrl: undefined,
      },
      // Run from this checkout, which has ./mediaplane: the command is typed as the key command is.
      invocation: { execPath: process.execPath, script: BIN, cwd: fileURLToPath(new URL('../../', import.meta.url)) },
      models,
    });

  it('says how to get a small model that runs on a laptop CPU, and only when there is none', () => {
    assert.match(banner([]), /^ +\.\/mediaplane models pull Qwen\/Qwen2\.5-0\.5B-Instruct-GGUF$/m);
    assert.match(banner([]), /laptop CPU/);
    assert.doesNotMatch(banner([MODEL]), /models pull/);
    assert.doesNotMatch(banner(undefined), /models pull/);
  });
});
