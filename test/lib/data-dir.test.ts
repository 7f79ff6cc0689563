import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/config/index.ts';
import { DirNotPrivateError } from '../../src/lib/private-dir.ts';
import { startRoles } from '../../src/main.ts';
import { startTestServer, transcodeBody } from '../helpers/server.ts';

// Issue #25, hole 3: the data dir holds the embedded database, whose WAL carries webhook
// secrets and tasks' S3 keys in files PGlite writes 0666. Whichever command creates the data
// dir creates it 0700, and one that others can enter is made private at start (or refused).
// What counts is what another local user can do: the checks run commands as `nobody`.

const BIN = fileURLToPath(new URL('../../bin/mediaplane.js', import.meta.url));
const asRoot = process.getuid?.() === 0;
const hasSetpriv = spawnSync('setpriv', ['--version']).status === 0;
const skip = !asRoot ? 'runs commands as `nobody`, which needs root' : !hasSetpriv && 'setpriv (util-linux) is missing';

/** Runs `cmd` as the local user `nobody`: its exit code and output. */
function asNobody(cmd: string[]) {
  const r = spawnSync('setpriv', ['--reuid=nobody', '--regid=nogroup', '--clear-groups', ...cmd], {
    encoding: 'utf8',
  });
  return { code: r.status, out: r.stdout + r.stderr };
}

function cli(args: string[], dataDir: string) {
  const r = spawnSync(process.execPath, [BIN, ...args], {
    env: { ...process.env, MEDIAPLANE_DATA_DIR: dataDir, MEDIAPLANE_LOG_LEVEL: 'warn' },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const parents: string[] = [];
after(() => {
  for (const p of parents) rmSync(p, { recursive: true, force: true });
});

/** A folder every local user may enter (mkdtemp makes 0700 ones), for a data dir inside. */
function openParent(): string {
  const p = mkdtempSync(join(tmpdir(), 'mp-datadir-'));
  chmodSync(p, 0o755);
  parents.push(p);
  return p;
}

const modeOf = (path: string) => statSync(path).mode & 0o777;

describe('the data dir: another local user cannot read it', { skip }, () => {
  it('`start` on a data dir that did not exist: nobody can list it, read the WAL or the filenode map, or grep a secret', async () => {
    const dataDir = join(openParent(), 'data');
    const server = await startTestServer({ dataDir, roles: { api: true, worker: false } });
    const secret = `wal-secret-${Date.now()}`;
    const body = transcodeBody();
    const storage = body.storage as { credentials: Record<string, string> };
    storage.credentials.secretAccessKey = secret;
    const key = await server.key('alice');
    assert.equal((await server.call('POST', '/api/transcode', { key, body })).status, 200);
    await server.stop();

    const pgdata = join(dataDir, 'db', 'pgdata');
    const wal = readdirSync(join(pgdata, 'pg_wal')).find((f) => /^[0-9A-F]{24}$/.test(f));
    assert.ok(wal, 'the embedded database wrote a WAL segment');
    const filenodeMap = join(pgdata, 'global', 'pg_filenode.map');
    assert.ok(existsSync(filenodeMap));

    assert.notEqual(asNobody(['ls', dataDir]).code, 0, 'nobody lists the data dir');
    assert.notEqual(asNobody(['cat', join(pgdata, 'pg_wal', wal)]).code, 0, 'nobody reads the WAL');
    assert.notEqual(asNobody(['cat', filenodeMap]).code, 0, 'nobody reads the filenode map');
    assert.notEqual(asNobody(['sh', '-c', `: >> ${filenodeMap}`]).code, 0, 'nobody writes the filenode map');
    const grep = asNobody(['grep', '-r', '-l', secret, dataDir]);
    assert.notEqual(grep.code, 0);
    assert.doesNotMatch(grep.out, /pg_wal\/[0-9A-F]{24}$/m, 'nobody finds the S3 secret in the WAL');
    assert.equal(modeOf(dataDir), 0o700);
  });

  it('`keys create` and `agent did` on a data dir that did not exist create it 0700', () => {
    const parent = openParent();
    const keysDir = join(parent, 'keys-data');
    const created = cli(['keys', 'create', '--owner', 'alice'], keysDir);
    assert.equal(created.code, 0, created.stderr);
    assert.equal(modeOf(keysDir), 0o700);
    assert.notEqual(asNobody(['ls', keysDir]).code, 0);

    const agentDir = join(parent, 'agent-data');
    const agent = cli(['agent', 'did'], agentDir);
    assert.equal(agent.code, 0, agent.stderr);
    assert.equal(modeOf(agentDir), 0o700);
  });

  it('an existing data dir that others can enter is made private at start, with a warning naming it', async () => {
    const dataDir = join(openParent(), 'data');
    mkdirSync(dataDir, { mode: 0o755 });
    chmodSync(dataDir, 0o755);
    const server = await startTestServer({ dataDir, roles: { api: true, worker: false } });
    try {
      assert.equal(modeOf(dataDir), 0o700);
      assert.notEqual(asNobody(['ls', dataDir]).code, 0);
      const warning = server.logs.lines.map((l) => JSON.parse(l) as { level: number; msg: string; dataDir?: string });
      assert.ok(
        warning.some((l) => l.level === 40 && l.dataDir === dataDir && /other local users \(mode 0755\)/.test(l.msg)),
        server.logs.text,
      );
    } finally {
      await server.stop();
    }

    const cliDir = join(openParent(), 'data');
    mkdirSync(cliDir, { mode: 0o750 });
    chmodSync(cliDir, 0o750);
    const created = cli(['keys', 'create', '--owner', 'alice'], cliDir);
    assert.equal(created.code, 0, created.stderr);
    assert.equal(modeOf(cliDir), 0o700);
    assert.match(created.stderr, new RegExp(`${cliDir} is open to other local users \\(mode 0750\\)`));
  });

  it("refuses an open data dir it cannot make private (another user's, or a shared one), naming it", async () => {
    const theirs = join(openParent(), 'data');
    mkdirSync(theirs);
    chmodSync(theirs, 0o755);
    chownSync(theirs, 65534, 65534);
    const config = loadConfig({
      env: {},
      overrides: { port: 0, host: '127.0.0.1', dataDir: theirs, logLevel: 'silent' },
    });
    await assert.rejects(startRoles(config, { api: true, worker: false }), (err: unknown) => {
      assert.ok(err instanceof DirNotPrivateError);
      assert.match(err.message, new RegExp(`${theirs} is open to other local users .*belongs to uid 65534`));
      return true;
    });
    assert.deepEqual(readdirSync(theirs), [], 'nothing was written in it');
    const keys = cli(['keys', 'create', '--owner', 'alice'], theirs);
    assert.equal(keys.code, 2);
    assert.match(keys.stderr, new RegExp(`mediaplane keys: ${theirs} is open to other local users`));

    const shared = join(openParent(), 'shared');
    mkdirSync(shared);
    chmodSync(shared, 0o1777);
    const agent = cli(['agent', 'did'], shared);
    assert.equal(agent.code, 2);
    assert.match(agent.stderr, /shared directory \(sticky bit\)/);
    assert.equal(modeOf(shared), 0o777, 'left as it was');
  });
});
