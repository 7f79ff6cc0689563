// What the soak (bench/soak.ts) sends beside its small transcodes: long inputs that the workers
// split into pieces (audio pieces, chunks, a stitch), and uploads (PUT to the URL of POST
// /api/asset/request-upload) that become assets in the built-in store; and which worker to
// kill when the kill must land mid-piece or mid-stitch.

import { readFile } from 'node:fs/promises';
import type { Db } from '../src/db/index.ts';
import type { Expected } from './soak-outputs.ts';

export type SubmissionKind = 'short' | 'long' | 'upload';

/** The soak's two inputs: what each holds, for the check of the outputs. */
export interface Inputs {
  short: { file: string; expected: Expected };
  long: { file: string; expected: Expected };
}

/** One submission: a transcode (its outputs under soak/<i>/) or an upload (its asset's playback id). */
export interface Submitted {
  id: string;
  kind: SubmissionKind;
  input: keyof Inputs;
  /** Where its outputs are in the bucket. */
  prefix: string;
}

/** Settings of the soak's workers that split its long input: over 10 s, in 4 s chunks and 4 s audio pieces. */
export const SPLIT_SETTINGS = { MEDIAPLANE_CHUNK_THRESHOLD_SECS: '10', MEDIAPLANE_CHUNK_SECS: '4' };

/** The order of the submissions: the long ones and the uploads spread evenly among the short ones. */
export function schedule(o: { tasks: number; long: number; uploads: number }): SubmissionKind[] {
  const kinds: SubmissionKind[] = Array.from({ length: o.tasks }, () => 'short');
  const spread = (kind: SubmissionKind, n: number, offset: number): void => {
    for (let i = 0; i < n; i++) {
      const at = Math.floor(((i + offset) * kinds.length) / n);
      kinds.splice(Math.min(at + i, kinds.length), 0, kind);
    }
  };
  spread('long', o.long, 0.25);
  spread('upload', o.uploads, 0.6);
  return kinds;
}

export interface UploadedAsset {
  taskId: string;
  playbackId: string;
  assetId: string;
}

interface RequestedUpload {
  url: string;
  asset: { id: string; playbackId: string };
  task: { id: string };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * An asset made by a direct PUT of `file`, whatever the API does meanwhile: the request is
 * retried until it answers, the PUT on the same URL until it is taken (a spent URL answers 404:
 * then the asset says whether the bytes arrived).
 */
export async function uploadAsset(o: {
  url: () => string;
  key: string;
  file: string;
  name: string;
}): Promise<UploadedAsset> {
  const until = Date.now() + 120_000;
  const auth = { authorization: `Bearer ${o.key}` };
  let grant: RequestedUpload | undefined;
  while (!grant) {
    grant = await fetch(`${o.url()}/api/asset/request-upload`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: o.name, staticMp4: true }),
      signal: AbortSignal.timeout(10_000),
    }).then(
      async (r) => (r.ok ? ((await r.json()) as RequestedUpload) : undefined),
      () => undefined,
    );
    if (!grant && Date.now() > until) throw new Error('could not request an upload for 2 minutes');
    if (!grant) await sleep(250);
  }
  const body = await readFile(o.file);
  for (;;) {
    const status = await fetch(grant.url, { method: 'PUT', body, signal: AbortSignal.timeout(30_000) }).then(
      (r) => r.status,
      () => 0,
    );
    if (status >= 200 && status < 300) break;
    if (status === 404 && (await assetPhase(o.url(), auth, grant.asset.id)) !== 'uploading') break;
    if (Date.now() > until) throw new Error(`could not upload ${o.name} for 2 minutes (last answer ${status})`);
    await sleep(250);
  }
  return { taskId: grant.task.id, playbackId: grant.asset.playbackId, assetId: grant.asset.id };
}

async function assetPhase(base: string, headers: Record<string, string>, id: string): Promise<string | undefined> {
  return fetch(`${base}/api/asset/${id}`, { headers, signal: AbortSignal.timeout(10_000) }).then(
    async (r) => (r.ok ? ((await r.json()) as { status: { phase: string } }).status.phase : undefined),
    () => undefined,
  );
}

/** Which kind of run a kill must land in: any, a piece (an audio piece or a chunk), a stitch. */
export type KillTarget = 'any' | 'piece' | 'stitch';

const TYPES: Record<KillTarget, string[] | undefined> = {
  any: undefined,
  piece: ['transcode-audio', 'transcode-chunk'],
  stitch: ['transcode-stitch'],
};

/** Whether a task type is a piece's (its claims write no task event). */
export const isPieceType = (type: string): boolean => [...(TYPES.piece ?? []), ...(TYPES.stitch ?? [])].includes(type);

/** The slots whose worker (by pid) holds a running task of the target's kind now. */
export async function slotsRunning(db: Db, pids: (number | undefined)[], target: KillTarget): Promise<number[]> {
  const types = TYPES[target];
  const busy: number[] = [];
  for (const [i, pid] of pids.entries()) {
    if (pid === undefined) continue;
    const rows = await db.query(
      `SELECT 1 FROM tasks WHERE phase = 'running' AND lease_owner LIKE $1 AND ($2::text[] IS NULL OR type = ANY($2))`,
      [`worker-${pid}-%`, types ?? null],
    );
    if (rows.length > 0) busy.push(i);
  }
  return busy;
}

/** Pieces' intermediate objects left in the store after every task is final (a stitch removes its task's). */
export function leftoverPieces(keys: string[]): string[] {
  return keys.filter((k) => /(^|\/)pieces\//.test(k));
}

/** A run a killed worker held: the task's attempts and crashes then. */
export interface HeldRun {
  id: string;
  attempts: number;
  crashes: number;
}

/**
 * Reclaim latencies of pieces, which write no task events: each held piece is looked at on
 * every pass of the soak's loop (200 ms) until a later claim counts one more crash; the
 * latency is from the kill to the first pass that sees it (so up to a pass too long).
 */
export class PieceReclaims {
  readonly latencies: number[] = [];
  #pending: { run: HeldRun; killedAt: number }[] = [];

  watch(runs: HeldRun[], killedAt: number): void {
    this.#pending.push(...runs.map((run) => ({ run, killedAt })));
  }

  async poll(db: Db): Promise<void> {
    if (this.#pending.length === 0) return;
    const rows = await db.query<{ id: string; phase: string; attempts: number; crashes: number }>(
      `SELECT id::text AS id, phase, attempts, crashes FROM tasks WHERE id = ANY($1::uuid[])`,
      [this.#pending.map((p) => p.run.id)],
    );
    const now = Date.now();
    this.#pending = this.#pending.filter(({ run, killedAt }) => {
      const row = rows.find((r) => r.id === run.id);
      if (!row) return false;
      if (row.attempts > run.attempts && row.crashes > run.crashes) {
        this.latencies.push(now - killedAt);
        return false;
      }
      // A run that ended in the instant between the bench's look and the kill is not a reclaim.
      return row.phase !== 'completed' && row.phase !== 'failed' && row.phase !== 'cancelled';
    });
  }
}
