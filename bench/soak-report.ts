// The soak's verdict (bench/soak.ts): once every task is final, what was lost, run twice,
// orphaned or leaked, how fast killed runs were reclaimed, and every output checked whole;
// printed as a table and as JSON, with exit status 1 when a check fails.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Db } from '../src/db/index.ts';
import type { TestS3 } from '../test/helpers/s3.ts';
import {
  type Inputs,
  type KillTarget,
  leftoverPieces,
  type PieceReclaims,
  type SubmissionKind,
  type Submitted,
} from './soak-film.ts';
import { addOutputs, checkOutputs, noOutputs, type OutputCheck } from './soak-outputs.ts';
import { type Service, sleep } from './soak-service.ts';
import { dirBytes, type EncoderWatch, jobProcesses, overlappingRuns, reclaimLatencies } from './soak-watch.ts';
import { quantile } from './stats.ts';

/** The phases a task ends in. */
export const FINAL = ['completed', 'failed', 'cancelled'];

interface ReportContext {
  o: { leaseMs: number; outageMs: number };
  service: Service;
  db: Db;
  s3: TestS3;
  bucket: string;
  ids: Submitted[];
  inputs: Inputs;
  work: string;
  watch: EncoderWatch;
  reclaims: PieceReclaims;
}

interface TaskFinal {
  id: string;
  parent: string | null;
  phase: string;
  retries: number;
  crashes: number;
  error_message: string | null;
}

/** Every submitted task's outputs (a transcode's under soak/<i>/, an asset's in the store) checked whole. */
async function checkAll(c: ReportContext, finals: TaskFinal[]): Promise<OutputCheck> {
  const into = path.join(c.work, 'bucket');
  const outputs = noOutputs();
  for (const t of c.ids) {
    if (finals.find((p) => p.id === t.id)?.phase !== 'completed') continue;
    const expected = c.inputs[t.input].expected;
    addOutputs(outputs, await checkOutputs({ s3: c.s3, bucket: c.bucket, prefix: t.prefix, expected, into }));
  }
  return outputs;
}

export async function report(c: ReportContext): Promise<number> {
  const ids = c.ids.map((t) => t.id);
  // The submitted tasks and their pieces: a piece's crashes and retries are its own.
  const all = await c.db.query<TaskFinal>(
    `SELECT id::text AS id, parent_id::text AS parent, phase, retries, crashes, error_message FROM tasks
     WHERE id = ANY($1::uuid[]) OR parent_id = ANY($1::uuid[])`,
    [ids],
  );
  const phases = all.filter((t) => t.parent === null);
  const count = (p: string) => phases.filter((t) => t.phase === p).length;
  const lost = ids.length - phases.filter((t) => FINAL.includes(t.phase)).length;
  // The workers sweep once a lease period: give them two before counting what is left.
  await sleep(2 * c.o.leaseMs + 1000);
  const roots = c.service.slots.map((s) => path.join(s.dir, 'scratch'));
  const leaked = (await Promise.all(roots.map(dirBytes))).reduce((a, b) => a + b, 0);
  const leftPieces = leftoverPieces(await c.s3.keys(c.bucket));
  const leftover = jobProcesses(roots);
  // A task's from its events, a piece's as the loop saw it (it writes no event).
  const latencies = [...(await reclaimLatencies(c.db, c.service.kills)), ...c.reclaims.latencies];
  const logs = await Promise.all(
    c.service.slots.map((_, i) => readFileSync(path.join(c.work, `worker-${i}.log`), 'utf8')),
  );
  const overlapping = overlappingRuns(logs, c.service.kills);
  const outputs = await checkAll(c, phases);
  const retries = all.reduce((a, t) => a + t.retries, 0);
  const crashes = all.reduce((a, t) => a + t.crashes, 0);
  const mostFailures = Math.max(0, ...all.map((t) => t.retries - t.crashes));
  const kinds = (k: SubmissionKind) => c.ids.filter((t) => t.kind === k).length;
  const aimed = (t: KillTarget) => c.service.kills.filter((k) => k.target === t).length;
  const figures = {
    submitted: ids.length,
    kinds: { short: kinds('short'), long: kinds('long'), uploads: kinds('upload'), pieces: all.length - phases.length },
    completed: count('completed'),
    failed: count('failed'),
    lost,
    workerKills: { total: c.service.kills.length, midPiece: aimed('piece'), midStitch: aimed('stitch') },
    runTwiceAtOnce: { encoders: c.watch.twiceAtOnce.size, logs: overlapping.size, samples: c.watch.samples },
    orphanedProcesses: { afterKill: c.service.orphans.length, atEnd: leftover.length },
    leakedScratchBytes: leaked,
    leakedPieceObjects: leftPieces.length,
    reclaimLatencyMs: {
      n: latencies.length,
      p50: Math.round(quantile(latencies, 0.5)),
      max: latencies.length > 0 ? Math.round(Math.max(...latencies)) : NaN,
    },
    retries: { total: retries, crashes, failures: retries - crashes, mostFailuresOfOneTask: mostFailures },
    outputs: { ...outputs, problems: outputs.problems.length },
  };
  console.log(`
submitted            ${figures.submitted} (${figures.kinds.short} small, ${figures.kinds.long} long, ${figures.kinds.uploads} uploads; ${figures.kinds.pieces} pieces)
completed            ${figures.completed}
failed               ${figures.failed}
lost                 ${figures.lost}
worker kills         ${figures.workerKills.total} (${figures.workerKills.midPiece} aimed mid-piece, ${figures.workerKills.midStitch} mid-stitch; +1 API kill, 1 S3 outage of ${c.o.outageMs} ms)
run twice at once    ${figures.runTwiceAtOnce.encoders} (two encoders alive, ${c.watch.samples} samples), ${figures.runTwiceAtOnce.logs} (overlapping runs in the logs)
orphaned processes   ${figures.orphanedProcesses.afterKill} (alive 1 s after their worker's kill), ${figures.orphanedProcesses.atEnd} (left at the end)
leaked               ${figures.leakedScratchBytes} scratch bytes, ${figures.leakedPieceObjects} pieces' objects in the store
reclaim latency      p50 ${figures.reclaimLatencyMs.p50} ms, max ${figures.reclaimLatencyMs.max} ms (${latencies.length} runs taken back; lease ${c.o.leaseMs} ms)
retries              ${retries} (${crashes} after crashes, ${retries - crashes} after failures; at most ${mostFailures} failure retries for one task or piece)
outputs              ${outputs.objects} objects: ${outputs.playlists} media playlists, ${outputs.segments} segments, ${outputs.mp4s} MP4s; ${outputs.problems.length} problems`);
  for (const p of outputs.problems.slice(0, 20)) console.log(`  ${p}`);
  for (const k of leftPieces.slice(0, 10)) console.log(`  left in the store: ${k}`);
  for (const [task, runs] of overlapping) console.log(`  overlapping runs of ${task}: ${runs}`);
  for (const t of c.watch.twiceAtOnce) console.log(`  two encoders at once: ${t}`);
  for (const t of phases.filter((p) => p.phase === 'failed'))
    console.log(`  failed ${t.id} (${t.crashes} crashes, ${t.retries - t.crashes} failures): ${t.error_message}`);
  console.log(`\n${JSON.stringify(figures)}`);
  const ok =
    figures.completed === ids.length &&
    lost === 0 &&
    figures.runTwiceAtOnce.encoders + figures.runTwiceAtOnce.logs === 0 &&
    figures.orphanedProcesses.afterKill + figures.orphanedProcesses.atEnd === 0 &&
    leaked === 0 &&
    leftPieces.length === 0 &&
    outputs.problems.length === 0;
  return ok ? 0 : 1;
}
