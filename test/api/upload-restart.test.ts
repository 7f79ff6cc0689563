// A tus upload survives the service being SIGKILLed mid-upload (issue #27 item 5): the bytes
// staged in the data dir are the offset the restarted service answers, and tus-js-client
// resumes from there. The service runs as `mediaplane start` in a child process, on the
// embedded database (the default an operator gets), behind a TCP proxy that holds the PATCH at
// half the file while the child is killed, so the kill lands mid-request whatever the speed.
// SERIAL in scripts/test.ts: it kills processes.

import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { waitFor } from '../helpers/server.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { bigVideo, requestUpload, sha256File, tusUpload } from '../helpers/uploads.ts';

const BIN = fileURLToPath(new URL('../../bin/mediaplane.js', import.meta.url));

async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const { port } = srv.address() as net.AddressInfo;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

describe('a tus upload while the service is SIGKILLed and restarted', () => {
  let dataDir: string;
  let proxy: TcpProxy;
  let env: NodeJS.ProcessEnv;
  let url: string;
  let key: string;
  let child: ChildProcess | undefined;
  const starts: number[] = [];
  /** Everything the service wrote, both runs (its log lines). */
  let output = '';

  /** `mediaplane start` on the fixed port, ready once /healthz answers. */
  async function startService(): Promise<ChildProcess> {
    const c = spawn(process.execPath, [BIN, 'start'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (b: Buffer) => {
      output += b.toString();
    };
    c.stdout?.on('data', keep);
    c.stderr?.on('data', keep);
    child = c;
    await waitFor(
      async () => {
        if (c.exitCode !== null) assert.fail(`mediaplane start exited with ${c.exitCode}: ${output.slice(-4000)}`);
        return fetch(`${url}/healthz`).then(
          (r) => r.ok,
          () => false,
        );
      },
      60_000,
      'the service to answer',
    );
    if (c.pid) starts.push(c.pid);
    return c;
  }

  before(async () => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'mediaplane-upload-restart-'));
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    proxy = await startTcpProxy({ host: '127.0.0.1', port });
    env = {
      ...process.env,
      MEDIAPLANE_DATA_DIR: dataDir,
      MEDIAPLANE_PORT: String(port),
      MEDIAPLANE_HOST: '127.0.0.1',
      // The upload URLs (the tus Location too) go through the proxy, and stay valid across the restart.
      MEDIAPLANE_PUBLIC_URL: proxy.url,
      MEDIAPLANE_POLL_MS: '100',
      MEDIAPLANE_LOG_LEVEL: 'info',
    };
    key = (
      await promisify(execFile)(process.execPath, [BIN, 'keys', 'create', '--owner', 'alice'], { env })
    ).stdout.trim();
    await startService();
  });
  after(async () => {
    child?.kill('SIGKILL');
    await proxy.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('resumes from the offset the restarted service answers; the asset’s sha256 is the file’s', async () => {
    const file = await bigVideo(50);
    const size = statSync(file).size;
    const u = await requestUpload(url, key);
    const first = child;
    let restarted: Promise<ChildProcess> | undefined;
    proxy.breakAt(proxy.sent + Math.floor(size / 2), 'hold', () => {
      first?.kill('SIGKILL');
      restarted = new Promise<void>((r) => first?.once('exit', () => r())).then(startService);
    });
    const patches: number[] = [];
    await tusUpload(u.tusEndpoint, file, {
      // Tried again every second while the service is down (it starts in a few seconds).
      retryDelays: Array.from({ length: 60 }, () => 1000),
      onBeforeRequest: (req) => {
        if (req.getMethod() === 'PATCH') patches.push(Number(req.getHeader('Upload-Offset')));
      },
    });
    await restarted;
    assert.equal(starts.length, 2, 'the service was killed and started again');
    assert.equal(patches[0], 0);
    assert.equal(patches.length, 2, `one PATCH before the kill, one after: ${patches}`);
    assert.ok((patches[1] ?? 0) > size * 0.4, `the upload resumed at ${patches[1]} of ${size}`);

    const ready = await waitFor(
      async () => {
        const res = await fetch(`${url}/api/asset/${u.asset.id}`, { headers: { authorization: `Bearer ${key}` } });
        const a = (await res.json()) as any;
        if (a.status?.phase === 'failed') assert.fail(`the asset failed: ${a.status.errorMessage}`);
        return a.status?.phase === 'ready' ? a : undefined;
      },
      120_000,
      'the asset to be ready',
    );
    const sha = ready.hash.find((h: { algorithm: string }) => h.algorithm === 'sha256')?.hash;
    assert.equal(sha, await sha256File(file));
    assert.equal(ready.size, size);
    assert.ok(output.includes('/api/asset/upload/tus/'), 'the service logged the upload requests');
    assert.ok(!output.includes(u.token), 'the token is in no log line');
  });
});
