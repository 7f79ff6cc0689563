// The test files of `npm test`, run by node's own test runner in two turns (issue #26: the
// suite at least 1.5x faster on the same machine). First the independent files, CONCURRENCY
// at a time: each starts its servers on port 0 in its own temporary folders and makes its
// own databases. Then the SERIAL files, one at a time with nothing beside them: they time
// what they assert (a child's death within a second, /healthz during a heavy request, a
// delivery within 2.5 s) or kill processes, and a busy machine would fail them for nothing.
// What every file would otherwise make for itself is made once here and handed down
// (test-resources.ts): the PostgreSQL server and a migrated template on it, a migrated
// embedded database, one Chromium, the folder of generated inputs. The whole suite (no files
// named, or --checks) also runs the lint and the type checks beside the first turn, and fails
// when they fail. `node scripts/test.ts [files...]` runs a subset.
import { spawn } from 'node:child_process';
import { globSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import path, { relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startRunResources } from './test-resources.ts';

// A new file that asserts a duration, leans on a lease or heartbeat, or kills processes
// belongs here, and so does one whose heavy encodes are awaited within fixed bounds (under a
// first turn's load they ran past them); everything else runs beside other files. A play in
// Chromium alone is no timing: the player page waits up to 20 s for one second of playback
// (test/helpers/player).
const SERIAL = new Set([
  'test/api/http-limits.test.ts', // a socket closed within 5x the 400 ms request timeout
  'test/api/upload-restart.test.ts', // SIGKILLs the service mid-upload and starts it again
  'test/api/upload-timeouts.test.ts', // bodies sent over 2.5 s against a 500 ms request timeout, 1 s idle timeout
  'test/fuzz/schemas.test.ts', // /healthz within 1 s during a 1 MiB schema
  'test/tasks/crash-encode.test.ts', // SIGKILLs a worker; its ffmpeg dead within 1 s; 1.5 s leases
  'test/tasks/crash-hygiene.test.ts', // SIGKILLs parents; children dead within 1 s
  'test/tasks/multiprocess.test.ts', // worker processes on 1.5 s leases, both must take jobs
  'test/tasks/worker.test.ts', // a cancel reaches the job within 5 s; leases
  'test/transcode/handler.test.ts', // a cancelled encode stops within 15 s
  'test/assets/clip-crash.test.ts', // SIGKILLs a worker mid-clip; 1.5 s leases
  'test/webhooks/limits.test.ts', // a delivery within 2.5 s while another receiver hangs
  'test/transcode/chunked-acceptance.test.ts', // two worker processes, SIGKILLs one mid-chunk; Chromium plays
  'test/api/key-limits.test.ts', // bursts of 200 requests over two API processes within one 10 s rate window
  'test/transcode/playback.test.ts', // a dozen ladders queued at once, each awaited within 180 s
  'test/transcode/per-title-playback.test.ts', // per-title ladders (analysis and encodes) awaited within fixed bounds
  'test/console/story.test.ts', // an upload, a clip and a chat, each awaited within fixed bounds in one page
  'test/console/first-hour.test.ts', // a worker encodes two videos, each awaited within a fixed bound in one page
  'test/live/live-rtmp.test.ts', // glass-to-glass p50 under 3 s through a live ladder that must keep up with real time
  'test/live/live-srt.test.ts', // a live ladder in real time, each rendition played within its 15 s publish
  'test/live/live-many.test.ts', // four live ladders at once; a stall is 1.5 s without a new part
  'test/console/stream-live.test.ts', // a live ladder in real time played in the page within its 15 s publish
  'test/live/live-ingest-role.test.ts', // a service started and stopped by SIGTERM within fixed bounds
  'test/live/multistream-e2e.test.ts', // two restream receivers get media within 3 s of stream.started; one is killed
  'test/live/multistream-pusher.test.ts', // real-time fMP4 pushed to receivers that are killed and come back
  'test/live/multistream-reconnect.test.ts', // a publisher back within a reconnect window timed in seconds
  'test/live/session-reconnect.test.ts', // reconnect windows of a few seconds, a live ladder in real time
  'test/live/recording-e2e.test.ts', // a publisher SIGKILLed and back within the window; the recording's length to 0.5 s
  'test/live/cluster-failover.test.ts', // a node SIGKILLed, its 4 s lease; the viewer back within 15 s
  'test/live/cluster-servers.test.ts', // viewers on a second node through a live ladder in real time
  'test/api/live-clip.test.ts', // a clip of a live ladder's last seconds by the wall clock
  'test/console/stream-sessions.test.ts', // a recorded publish in real time, its clip and sessions in the page
]);

// Most files wait on timers, sockets and child processes more than they compute: twice as
// many files as cores keeps the cores busy (measured in issue #26's closing note).
const CONCURRENCY = Math.max(2, availableParallelism() * 2);

let interrupted: NodeJS.Signals | undefined;

const TIMES_REPORTER = fileURLToPath(new URL('./test-times.ts', import.meta.url));
const timesDir = mkdtempSync(path.join(tmpdir(), 'mediaplane-test-times-'));
let turns = 0;

interface TurnLine {
  file?: string;
  ms?: number;
  counts?: { passed: number; failed: number; skipped: number; cancelled: number; todo: number };
}

/**
 * The slowest files of the run (test-times.ts wrote each turn's), to see where the minutes go,
 * then one closing line for both turns: `N passed, N failed, N skipped`.
 */
function printSummary(n = 20): void {
  const lines = readdirSync(timesDir).flatMap((f) =>
    readFileSync(path.join(timesDir, f), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as TurnLine),
  );
  const times = lines.flatMap((l) => (l.file && l.ms !== undefined ? [{ file: l.file, ms: l.ms }] : []));
  times.sort((a, b) => b.ms - a.ms);
  if (times.length > 0)
    console.log(`# the ${Math.min(n, times.length)} slowest of ${times.length} test files (seconds, wall time)`);
  for (const t of times.slice(0, n))
    console.log(`#   ${(t.ms / 1000).toFixed(1).padStart(6)}  ${relative(process.cwd(), t.file)}`);
  const sum = { passed: 0, failed: 0, skipped: 0 };
  for (const { counts: c } of lines) {
    if (!c) continue;
    sum.passed += c.passed;
    sum.failed += c.failed + c.cancelled;
    sum.skipped += c.skipped + c.todo;
  }
  if (lines.some((l) => l.counts)) console.log(`${sum.passed} passed, ${sum.failed} failed, ${sum.skipped} skipped`);
}

/** One `node --test` over `files`; resolves with its exit code. A signal stops it and what follows. */
function nodeTest(files: string[], concurrency: number, env: NodeJS.ProcessEnv): Promise<number> {
  if (files.length === 0 || interrupted) return Promise.resolve(0);
  const timesFile = path.join(timesDir, `turn-${++turns}.jsonl`);
  const args = [
    ...['--test', `--test-concurrency=${concurrency}`, '--test-timeout=600000'],
    ...['--test-reporter=spec', '--test-reporter-destination=stdout'],
    ...[`--test-reporter=${TIMES_REPORTER}`, `--test-reporter-destination=${timesFile}`],
  ];
  const child = spawn(process.execPath, [...args, ...files], { stdio: 'inherit', env });
  const stop = (signal: NodeJS.Signals) => {
    interrupted = signal;
    child.kill(signal);
  };
  process.on('SIGINT', stop).on('SIGTERM', stop);
  return new Promise((resolve) =>
    child.once('exit', (code) => {
      process.off('SIGINT', stop).off('SIGTERM', stop);
      resolve(code ?? 1);
    }),
  );
}

/**
 * `npm run lint` and `npm run typecheck`, one after the other beside the first turn, their
 * output held back and printed whole when they end, so it does not mix with the tests'.
 */
async function runChecks(env: NodeJS.ProcessEnv): Promise<number> {
  for (const script of ['lint', 'typecheck']) {
    if (interrupted) return 1;
    const started = Date.now();
    const child = spawn('npm', ['run', '--silent', script], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const output: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => output.push(b));
    child.stderr.on('data', (b: Buffer) => output.push(b));
    const code = await new Promise<number>((r) => child.once('close', (c) => r(c ?? 1)));
    const took = ((Date.now() - started) / 1000).toFixed(1);
    process.stdout.write(`# npm run ${script}: ${code === 0 ? 'passed' : `FAILED (exit ${code})`} in ${took} s\n`);
    if (code !== 0) {
      process.stdout.write(Buffer.concat(output));
      return code;
    }
  }
  return 0;
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    concurrency: { type: 'string', default: String(CONCURRENCY) },
    checks: { type: 'boolean', default: false },
  },
});
const files = (positionals.length > 0 ? positionals : globSync('test/**/*.test.ts'))
  .map((f) => relative(process.cwd(), resolve(f)))
  .sort();
const concurrent = files.filter((f) => !SERIAL.has(f));
const serial = files.filter((f) => SERIAL.has(f));
const withChecks = values.checks || positionals.length === 0;
// The checks need none of the run's resources: they start while those are made.
const checks = withChecks ? runChecks(process.env) : Promise.resolve(0);
const resources = await startRunResources();
for (const note of resources.notes) console.log(`# ${note}`);
const { env } = resources;

const codes: number[] = [];
try {
  if (concurrent.length > 0) console.log(`# ${concurrent.length} test files, ${values.concurrency} at a time`);
  codes.push(await nodeTest(concurrent, Number(values.concurrency), env));
  codes.push(await checks);
  if (serial.length > 0) console.log(`# ${serial.length} test files one at a time (they time what they assert)`);
  codes.push(await nodeTest(serial, 1, env));
} finally {
  await resources.close();
  printSummary();
  rmSync(timesDir, { recursive: true, force: true });
}
process.exitCode = interrupted || codes.some((c) => c !== 0) ? 1 : 0;
