import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

// `./mediaplane sample` when it cannot do its work: the README's quick start runs it as
// written (test/assets/quickstart.test.ts); here, what a person reads when it fails.

const WRAPPER = fileURLToPath(new URL('../../mediaplane', import.meta.url));

function sample(args: string[], env: Record<string, string> = {}) {
  const child = spawn(WRAPPER, ['sample', ...args], { env: { ...process.env, ...env } });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.once('close', (code) => resolve({ code, stdout, stderr })),
  );
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  return typeof address === 'object' && address ? address.port : 1;
}

describe('./mediaplane sample', () => {
  it('without a key: a usage error naming --key, exit 2', async () => {
    const run = await sample([], { MEDIAPLANE_API_KEY: '' });
    assert.equal(run.code, 2);
    assert.match(run.stderr, /^mediaplane sample: sample needs an API key: --key KEY or MEDIAPLANE_API_KEY\n$/);
  });

  it('with no server there: one line saying so, nothing on stdout, exit 1', async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const run = await sample(['--key', 'mp_x', '--url', url, '--seconds', '1']);
    assert.equal(run.code, 1, run.stderr);
    assert.equal(run.stdout, '');
    assert.match(run.stderr, new RegExp(`^cannot reach the API at ${url}: .*ECONNREFUSED.*\\n$`));
  });

  it('a bad --seconds is a usage error', async () => {
    const run = await sample(['--key', 'mp_x', '--seconds', '0']);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /--seconds: must be a whole number from 1 to 60/);
  });
});
