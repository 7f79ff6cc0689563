// Helpers of the chunked tests (issue #30): the pieces run in order by hand, with fake job
// contexts (the queue's part is tested in test/tasks/pieces.test.ts), and the checks of
// seams against a single run of the same job.
import { execFile } from 'node:child_process';
import { createReadStream, statSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pino from 'pino';
import { parseRange } from '../../src/storage/index.ts';
import { SPLIT, type JobContext, type JobHandler, type PieceSpec, type PieceState } from '../../src/tasks/index.ts';
import { startHttp, type TestHttp } from '../helpers/http-input.ts';

const run = promisify(execFile);

/** A file served with HTTP ranges (206), counting the bytes sent. */
export function serveRanges(file: string): {
  route: (req: IncomingMessage, res: ServerResponse) => void;
  sent: { bytes: number; ranged: number };
} {
  const sent = { bytes: 0, ranged: 0 };
  const route = (req: IncomingMessage, res: ServerResponse): void => {
    const size = statSync(file).size;
    const range = parseRange(req.headers.range, size);
    if (range === null) {
      res.writeHead(416).end();
      return;
    }
    const part = range ?? { start: 0, end: size - 1 };
    const headers: Record<string, string | number> = {
      'accept-ranges': 'bytes',
      'content-length': part.end - part.start + 1,
      ...(range ? { 'content-range': `bytes ${part.start}-${part.end}/${size}` } : {}),
    };
    res.writeHead(range ? 206 : 200, headers);
    if (range) sent.ranged++;
    const stream = createReadStream(file, { start: part.start, end: part.end });
    stream.on('data', (c) => {
      sent.bytes += c.length;
    });
    stream.pipe(res);
  };
  return { route, sent };
}

/**
 * A test file's folder and its input: a temporary root (one of `scratch`) and `clip` served
 * with ranges at `route`; `close` stops the server and removes every scratch folder.
 */
export async function servedInput(
  scratch: string[],
  o: { prefix: string; route: string; clip: string },
): Promise<{ root: string; web: TestHttp; close(): Promise<void> }> {
  const root = await mkdtemp(path.join(os.tmpdir(), o.prefix));
  scratch.push(root);
  const web = await startHttp({ [o.route]: serveRanges(o.clip).route });
  return {
    root,
    web,
    close: async () => {
      await web.close();
      await Promise.all(scratch.map((d) => rm(d, { recursive: true, force: true })));
    },
  };
}

export async function fakeContext(scratch: string[], o: Partial<JobContext> & { taskId: string }): Promise<JobContext> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mp-chunk-job-'));
  scratch.push(dir);
  return {
    attempt: 1,
    signal: new AbortController().signal,
    scratchDir: dir,
    progress: () => {},
    log: pino({ level: 'silent' }),
    ...o,
  };
}

/** The split step's pieces: the handler's run ends with SPLIT. */
export async function splitPieces(
  handler: JobHandler<unknown, unknown>,
  params: unknown,
  ctx: Omit<JobContext, 'split'>,
): Promise<PieceSpec[]> {
  let pieces: PieceSpec[] | undefined;
  const result = await handler(params, {
    ...ctx,
    split: async (p) => {
      pieces = [...p];
      return SPLIT;
    },
  });
  if (result !== SPLIT || !pieces) throw new Error(`the task was not split: ${JSON.stringify(result)}`);
  return pieces;
}

/**
 * Runs the pieces one after the other, as one worker slot would (stored params: JSON round
 * trip), each seeing its siblings' states; `after(i)` runs once piece i completed.
 */
export async function runPieces(
  handlers: Record<string, JobHandler<unknown, unknown>>,
  pieces: readonly PieceSpec[],
  o: { parentId: string; scratch: string[]; order?: number[]; after?: (i: number) => Promise<void> },
): Promise<unknown> {
  const states: PieceState[] = pieces.map((p, i) => ({
    id: `${o.parentId}-${i}`,
    type: p.type,
    label: p.label,
    phase: 'waiting',
    progress: null,
    output: null,
    worker: null,
    runs: 0,
    error: null,
  }));
  let last: unknown;
  for (const i of o.order ?? pieces.map((_, k) => k)) {
    const p = pieces[i];
    const state = states[i];
    const handler = p && handlers[p.type];
    if (!p || !state || !handler) throw new Error(`no piece ${i} or no handler for it`);
    state.phase = 'running';
    state.runs++;
    const ctx = await fakeContext(o.scratch, {
      taskId: state.id,
      parentId: o.parentId,
      siblings: async () => states.map((s) => ({ ...s })),
    });
    last = await handler(JSON.parse(JSON.stringify(p.params)), ctx);
    state.phase = 'completed';
    state.output = last as Record<string, unknown>;
    await o.after?.(i);
  }
  return last;
}

/** Every packet of the first video stream of `file`: pts and dts in its time base, and its flags. */
export async function videoPackets(file: string): Promise<{ pts: number; dts: number; key: boolean }[]> {
  const { stdout } = await run(
    'ffprobe',
    ['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'packet=pts,dts,flags', '-of', 'csv=p=0', file],
    { maxBuffer: 64 << 20 },
  );
  return stdout
    .trim()
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => {
      const [pts = '', dts = '', flags = ''] = l.split(',');
      return { pts: Number(pts), dts: Number(dts), key: flags.startsWith('K') };
    });
}

/** Frames and duration of a file's first video stream, decoded. */
export async function frameCount(file: string): Promise<{ frames: number; duration: number }> {
  const { stdout } = await run('ffprobe', [
    '-v',
    'error',
    '-select_streams',
    'v:0',
    '-count_frames',
    '-show_entries',
    'stream=nb_read_frames:format=duration',
    '-of',
    'json',
    file,
  ]);
  const json = JSON.parse(stdout) as { streams: { nb_read_frames: string }[]; format: { duration: string } };
  return { frames: Number(json.streams[0]?.nb_read_frames), duration: Number(json.format.duration) };
}

/** The files of a media playlist folder concatenated in playlist order (with its init segment first), as one file. */
export async function joined(dir: string, out: string): Promise<string> {
  const text = await readFile(path.join(dir, 'index.m3u8'), 'utf8');
  const map = /#EXT-X-MAP:URI="([^"]+)"/.exec(text)?.[1];
  const uris = text.split('\n').filter((l) => l !== '' && !l.startsWith('#'));
  const parts = [...(map ? [map] : []), ...uris].map((u) => readFile(path.join(dir, u)));
  const { writeFile } = await import('node:fs/promises');
  await writeFile(out, Buffer.concat(await Promise.all(parts)));
  return out;
}

/** The `<S>` entries of the SegmentTimeline of Representation `id` in an MPD. */
export function timelineOf(mpd: string, id: string): string[] {
  const rep = new RegExp(`<Representation id="${id}"[\\s\\S]*?</Representation>`).exec(mpd)?.[0] ?? '';
  return [...rep.matchAll(/<S [^>]*\/>/g)].map((m) => m[0]);
}

export async function listDir(dir: string): Promise<string[]> {
  return (await readdir(dir).catch(() => [])).sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
}
