// docs/transcode.md "Adding an output kind": a new output kind is the files that section
// names, and nothing else. This test makes exactly those changes in a copy of src/ for a
// fixture format (a frame list per rendition, ffmpeg's framemd5 muxer in each rendition's
// tee), starts a service from the copy with a low chunk threshold, and runs a short input
// (one run) and a long one (split into pieces): the fixture's files and its result under its
// key are in both, every frame listed once.
//
// The service runs the copy's src/, so this file imports no module of the checkout's src/
// beyond two leaves (the embedded template's database, the range parser): the helpers that
// import main.ts (server.ts, chunked-helpers.ts) would load all of src/ a second time, several
// seconds on a loaded 2-core host.
import assert from 'node:assert/strict';
import { createReadStream, statSync } from 'node:fs';
import { cp, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { seedEmbeddedDb } from '../helpers/embedded-template.ts';
import { startHttp, type TestHttp } from '../helpers/http-input.ts';
import { makeClip } from '../helpers/media.ts';
import { parseRange } from '../../src/storage/range-proxy.ts';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const KIND = 'frames';
/** The same fixture saying its pieces cannot make it: such a job is one run whatever its length. */
const WHOLE_KIND = 'wholeframes';
const FPS = 10;

/** The fixture format's module, as a new kind's author writes it; `chunked` false: it cannot be chunked. */
const fixture = (
  kind: string,
  chunked: boolean,
): string => `import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { storageKey } from '../uploads.ts';
import { chunkedBehaviour } from './chunked-format.ts';
import type { OutputFormat } from './format.ts';

/** Test fixture: one line per video packet of each rendition (ffmpeg's framemd5 muxer). */
export interface FrameList {
  name: string;
  path: string;
  frames: number;
}

const file = (rendition: string): string => \`${kind}/\${rendition}.md5\`;
const packets = (text: string): string[] => text.split('\\n').filter((l) => l !== '' && !l.startsWith('#'));

export const ${kind}: OutputFormat<'${kind}', FrameList[], true> = {
  key: '${kind}',
  label: 'frame lists',
  requested: true,
  encoders: ['H.264', 'HEVC', 'AV1', 'VP9'],
  writes: (plan) => !!plan.kinds.${kind},
  dirs: () => ['${kind}'],
  videoTarget: (_plan, r) => \`[select=v:f=framemd5]\${file(r.name)}\`,
  open: (run, prefix) => ({
    publish: async () => {
      const out: FrameList[] = [];
      for (const r of run.renditions) {
        const local = path.join(run.outDir, file(r.name));
        const key = storageKey(prefix, \`\${r.name}.md5\`);
        run.queue.add(key, local);
        out.push({ name: r.name, path: \`/\${key}\`, frames: packets(await readFile(local, 'utf8')).length });
      }
      await run.queue.drain();
      return out;
    },
  }),
${chunked ? CHUNKED : '  chunked: false,\n'}};
`;

/** The fixture's chunked behaviour: each chunk keeps its frame lists, the stitch joins them. */
const CHUNKED = `  chunked: chunkedBehaviour<Record<string, string>, FrameList[]>({
    collect: async (piece) =>
      piece.chunk
        ? Object.fromEntries(piece.job.renditions.map((r) => [r.name, piece.keep(file(r.name), 'text/plain')]))
        : undefined,
    stitch: async (run) => {
      await mkdir(run.localDir, { recursive: true });
      const out: FrameList[] = [];
      for (const r of run.job.renditions) {
        const lines: string[] = [];
        for (const [i, chunk] of run.chunks.entries()) {
          const part = await run.fetchKept(chunk[r.name] ?? '', path.join(run.localDir, \`\${r.name}-\${i}\`));
          lines.push(...packets(await readFile(part, 'utf8')));
        }
        const local = path.join(run.localDir, \`\${r.name}.md5\`);
        await writeFile(local, lines.map((l) => \`\${l}\\n\`).join(''));
        const key = storageKey(run.prefix, \`\${r.name}.md5\`);
        run.queue.add(key, local);
        out.push({ name: r.name, path: \`/\${key}\`, frames: lines.length });
      }
      await run.queue.drain();
      return out;
    },
  }),
`;

/** The files the docs' numbered list under "Adding an output kind" names, for kind `kind`. */
async function filesTheDocsName(kind: string): Promise<string[]> {
  const doc = await readFile(path.join(repo, 'docs', 'transcode.md'), 'utf8');
  const section = doc.split('## Adding an output kind')[1]?.split('\n## ')[0] ?? '';
  const items = section.split(/\n(?=\d+\. )/).filter((b) => /^\d+\. /.test(b));
  return items.map((item) => {
    const named = /`(src\/[^`]+\.ts)`/.exec(item)?.[1];
    assert.ok(named, `item without a file: ${item}`);
    return named.replace('<kind>', kind);
  });
}

/** Serves `file` with byte ranges, as chunked-helpers.ts's serveRanges does (the split reads ranges). */
function serveRanges(file: string): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const size = statSync(file).size;
    const range = parseRange(req.headers.range, size);
    if (range === null) return void res.writeHead(416).end();
    const part = range ?? { start: 0, end: size - 1 };
    res.writeHead(range ? 206 : 200, {
      'accept-ranges': 'bytes',
      'content-length': part.end - part.start + 1,
      ...(range ? { 'content-range': `bytes ${part.start}-${part.end}/${size}` } : {}),
    });
    createReadStream(file, { start: part.start, end: part.end }).pipe(res);
  };
}

/** Polls `check` every 50 ms until it gives a value, for up to `timeoutMs` (server.ts's waitFor). */
async function waitFor<T>(check: () => Promise<T | undefined>, timeoutMs: number, what: string): Promise<T> {
  const start = Date.now();
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The changes the docs list for `kind`, made in the copy: the files it touched. */
async function addKind(copy: string, kind: string, source: string): Promise<string[]> {
  const touched: string[] = [];
  const edit = async (rel: string, change: (text: string) => string): Promise<void> => {
    const file = path.join(copy, rel);
    const before = await readFile(file, 'utf8');
    const after = change(before);
    assert.notEqual(after, before, `no change made in ${rel}`);
    await writeFile(file, after);
    touched.push(rel);
  };
  const module = `src/transcode/outputs/${kind}.ts`;
  await writeFile(path.join(copy, module), source);
  touched.push(module);
  await edit('src/transcode/outputs/index.ts', (t) =>
    t
      .replace(/^(import [^\n]*\n)(?!import )/m, `$1import { ${kind} } from './${kind}.ts';\n`)
      .replace(/(export const OUTPUT_FORMATS = \[[^\]]*)\]/, `$1, ${kind}]`),
  );
  await edit('src/api/contract/transcode.ts', (t) =>
    t.replace(
      /\n(\s*)\} satisfies Record<OutputKind, unknown>/,
      `\n    ${kind}: Type.Optional(OutputPath),\n$1} satisfies Record<OutputKind, unknown>`,
    ),
  );
  return touched;
}

interface Service {
  url: string;
  key: string;
  stop(): Promise<void>;
}

/** A service (API and worker, embedded database) started from the copy's own main.ts. */
async function startCopy(copy: string, dataDir: string): Promise<Service> {
  const { startRoles } = await import(path.join(copy, 'src', 'main.ts'));
  const { loadConfig } = await import(path.join(copy, 'src', 'config', 'index.ts'));
  const { createLogger } = await import(path.join(copy, 'src', 'lib', 'log.ts'));
  const config = loadConfig({
    env: {},
    overrides: {
      port: 0,
      host: '127.0.0.1',
      dataDir,
      allowPrivateUrls: true,
      pollMs: 50,
      // Leases are not what this file is about: long enough that a busy host's slow
      // heartbeats never stop a run and run it again.
      heartbeatMs: 1000,
      leaseMs: 15_000,
      retryBackoffMs: 50,
      shutdownGraceMs: 2000,
      // The three transcodes run at once (a chunked one's pieces beside the others).
      workerConcurrency: 4,
      // The API's stop waits for its keep-alive sockets: an idle one left open at close (a
      // pooled client socket) held it up for the default 72 s keep-alive.
      keepAliveTimeoutMs: 2000,
      logLevel: 'warn',
      x264Preset: 'ultrafast',
      perTitle: false,
      chunkThresholdSecs: 8,
      chunkSecs: 4,
    },
  });
  await seedEmbeddedDb(dataDir);
  const running = await startRoles(config, { api: true, worker: true }, createLogger({ level: 'warn' }));
  const { key } = await running.core.accounts.createKey('owner-new-kind');
  return { url: running.url, key, stop: () => running.stop() };
}

const scratch: string[] = [];
let copy: string;
let touched: Record<string, string[]>;
let service: Service;
let web: TestHttp;
/** The transcodes the tests check, posted together once the service is up. */
let runs: Record<'short' | 'chunked' | 'whole', Promise<{ output: any; pieces: unknown }>>;

before(async () => {
  copy = await mkdtemp(path.join(os.tmpdir(), 'mp-new-kind-'));
  scratch.push(copy);
  await cp(path.join(repo, 'src'), path.join(copy, 'src'), { recursive: true });
  await cp(path.join(repo, 'package.json'), path.join(copy, 'package.json'));
  for (const shared of ['node_modules', 'console']) await symlink(path.join(repo, shared), path.join(copy, shared));
  touched = {
    [KIND]: await addKind(copy, KIND, fixture(KIND, true)),
    [WHOLE_KIND]: await addKind(copy, WHOLE_KIND, fixture(WHOLE_KIND, false)),
  };
  const clip = (seconds: number) => makeClip({ width: 320, height: 180, seconds, fps: String(FPS) });
  // The service starts while the inputs are made; both settle before either is used, so a
  // failure of one leaves the other where after() stops it.
  const starting = startCopy(copy, path.join(copy, 'data')).then((s) => {
    service = s;
  });
  const clips = Promise.all([clip(3), clip(13)]);
  await Promise.allSettled([starting, clips]);
  const [short, long] = await clips;
  await starting;
  web = await startHttp({ '/short.mp4': serveRanges(short), '/long.mp4': serveRanges(long) });
  runs = {
    short: transcode('/short.mp4', KIND),
    chunked: transcode('/long.mp4', KIND),
    whole: transcode('/long.mp4', WHOLE_KIND),
  };
  // Each test awaits its own and fails with its error; none is an unhandled rejection meanwhile.
  for (const run of Object.values(runs)) run.catch(() => {});
});
after(async () => {
  await Promise.all([service?.stop(), web?.close()]);
  await Promise.all(scratch.map((d) => rm(d, { recursive: true, force: true })));
});

/** Posts a transcode of `input` asking for a fixture kind beside HLS and waits for it. */
async function transcode(input: string, kind: string): Promise<{ output: any; pieces: unknown }> {
  const call = async (method: string, route: string, body?: unknown) => {
    const res = await fetch(service.url + route, {
      method,
      headers: { authorization: `Bearer ${service.key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  const posted = await call('POST', '/api/transcode', {
    input: { url: web.url(input) },
    outputs: { hls: { path: '/hls' }, [kind]: { path: `/${kind}` } },
    profiles: [{ name: '180p', width: 320, height: 180, bitrate: 300_000 }],
    targetSegmentSizeSecs: 2,
  });
  assert.equal(posted.status, 200, JSON.stringify(posted.body));
  const task = await waitFor(
    async () => {
      const res = await call('GET', `/api/task/${posted.body.id}`);
      return ['completed', 'failed', 'cancelled'].includes(res.body.status.phase) ? res.body : undefined;
    },
    240_000,
    `the transcode of ${input}`,
  );
  assert.equal(task.status.phase, 'completed', JSON.stringify(task.status));
  return { output: task.output.transcodeFile, pieces: task.output.transcodeFile.pieces };
}

/** The fixture's result under its key, and its file as served. */
async function frameList(output: any, kind: string): Promise<{ frames: number; lines: number }> {
  const list = output[kind];
  assert.ok(Array.isArray(list) && list.length === 1, `${kind}: ${JSON.stringify(output)}`);
  assert.equal(list[0].name, '180p');
  assert.equal(list[0].path, `/${kind}/180p.md5`);
  const res = await fetch(list[0].url);
  assert.equal(res.status, 200);
  const lines = (await res.text()).split('\n').filter((l) => l !== '' && !l.startsWith('#'));
  return { frames: list[0].frames, lines: lines.length };
}

describe('a new output kind added as the docs say', () => {
  it('touches exactly the files docs/transcode.md "Adding an output kind" names', async () => {
    for (const kind of [KIND, WHOLE_KIND])
      assert.deepEqual([...(touched[kind] ?? [])].sort(), (await filesTheDocsName(kind)).sort());
  });

  it('appears in a single run, every frame listed', async () => {
    const { output, pieces } = await runs.short;
    assert.equal(pieces, undefined, 'a 3 s input is not split');
    assert.equal(output.hls.path, '/hls/index.m3u8');
    assert.deepEqual(await frameList(output, KIND), { frames: 3 * FPS, lines: 3 * FPS });
  });

  it('appears in a chunked run, its pieces stitched: every frame listed once', async () => {
    const { output, pieces } = await runs.chunked;
    assert.deepEqual(pieces, { chunks: 3, chunkSecs: 4, audio: true, audioPieces: 3 });
    assert.equal(output.hls.path, '/hls/index.m3u8');
    assert.deepEqual(await frameList(output, KIND), { frames: 13 * FPS, lines: 13 * FPS });
  });

  it('a kind that cannot be chunked makes a long input one run, with every output', async () => {
    const { output, pieces } = await runs.whole;
    assert.equal(pieces, undefined, 'not split');
    assert.equal(output.hls.path, '/hls/index.m3u8');
    assert.deepEqual(await frameList(output, WHOLE_KIND), { frames: 13 * FPS, lines: 13 * FPS });
  });
});
