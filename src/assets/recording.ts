import path from 'node:path';
import type { Queryable } from '../db/index.ts';
import { InputUnreadableError, InternalError } from '../lib/errors.ts';
import { FileInput, type InputSource } from '../storage/index.ts';
import { type JobContext, TASK_TYPES } from '../tasks/index.ts';
import type { ProcessingSpec } from './processing.ts';
import type { AssetStore } from './store.ts';
import type { RecordingArchive } from './types.ts';

// A live session's recording is an ordinary asset (spec/API.md section D): its id is the
// session's, its source `{type: "recording", sessionId}`, made by an `upload` task whose
// input is the session's archive (live/archive/, read through RecordingArchive), so it takes
// the road every video takes (one probe, one plan, chunking and per-title). The system makes
// it for the stream's owner: it queues like any task, with no API key, so no key's limits
// refuse it. live/ hands the ended session over (RecordingQueue, live/types.ts); assets/
// cannot import live/, so the session is the structural type below.

/** What a recording is made of: the session as the live domain keeps it (its SessionRecord). */
export interface RecordedSession {
  id: string;
  streamId: string;
  owner: string;
  projectId: string;
  /** The stream's name: the asset's name. */
  name: string;
  recordingSpec?: { profiles?: readonly RecordingProfile[] | null | undefined } | undefined;
}

/** A rung of `recordingSpec.profiles` (a live Profile: fps 0 keeps the source's rate). */
export interface RecordingProfile {
  name: string;
  width: number;
  height: number;
  bitrate: number;
  fps?: number | undefined;
  fpsDen?: number | undefined;
  gop?: string | undefined;
  profile?: StoredProfile['profile'] | undefined;
  encoder?: StoredProfile['encoder'] | undefined;
  quality?: number | undefined;
}

export interface AssetRecordingsOptions {
  /** The owner's queue limit (MEDIAPLANE_MAX_QUEUED_PER_OWNER): a full queue refuses now, and the session is queued again later. */
  maxQueuedPerOwner: number;
}

/** live/'s RecordingQueue, made of assets: one asset per recorded session, made once. */
export class AssetRecordings {
  readonly #assets: AssetStore;
  readonly #o: AssetRecordingsOptions;

  constructor(assets: AssetStore, o: AssetRecordingsOptions) {
    this.#assets = assets;
    this.#o = o;
  }

  /** Idempotent: a session whose asset exists already (made here, or by another node) is left as it is. */
  async queue(session: RecordedSession): Promise<void> {
    if (await this.#assets.exists(session.id)) return;
    const profiles = session.recordingSpec?.profiles?.map(storedProfile);
    try {
      await this.#assets.create({
        id: session.id,
        owner: session.owner,
        projectId: session.projectId,
        name: session.name,
        source: { type: 'recording', sessionId: session.id },
        spec: profiles === undefined ? {} : { profiles },
        requesterId: null,
        maxQueuedPerOwner: this.#o.maxQueuedPerOwner,
        task: {
          type: TASK_TYPES.upload,
          params: { input: { recording: { sessionId: session.id } }, ...(profiles === undefined ? {} : { profiles }) },
        },
        // `recording.waiting`, in the asset's own transaction (migration 502's live_event).
        also: (q) => waitingEvent(q, session),
      });
    } catch (err) {
      // Another node queued it between the look and the insert (the asset's id is the key).
      if (await this.#assets.exists(session.id)) return;
      throw err;
    }
  }
}

async function waitingEvent(q: Queryable, session: RecordedSession): Promise<void> {
  await q.query(
    `SELECT live_event($1, 'recording.waiting', jsonb_build_object('session', to_jsonb(s))) FROM stream_sessions s WHERE s.id = $2`,
    [session.streamId, session.id],
  );
}

type StoredProfile = NonNullable<ProcessingSpec['profiles']>[number];

/** A live rung as a transcode rung: fps 0 (the source's rate) is the transcode's default, so left out. */
function storedProfile(p: RecordingProfile): StoredProfile {
  const fps = p.fps ? { fps: p.fps, ...(p.fpsDen === undefined ? {} : { fpsDen: p.fpsDen }) } : {};
  return {
    name: p.name,
    width: p.width,
    height: p.height,
    bitrate: p.bitrate,
    ...fps,
    ...(p.gop === undefined ? {} : { gop: p.gop }),
    ...(p.profile === undefined ? {} : { profile: p.profile }),
    ...(p.encoder === undefined ? {} : { encoder: p.encoder }),
    ...(p.quality === undefined ? {} : { quality: p.quality }),
  };
}

/** The session's archived source, extracted whole into the job's scratch folder. */
export async function recordingInput(
  archive: RecordingArchive | undefined,
  sessionId: string,
  ctx: JobContext,
): Promise<InputSource> {
  if (archive === undefined) throw new InternalError('a recording task ran on a worker without the live archive');
  const dest = path.join(ctx.scratchDir, 'recording.mp4');
  const got = await archive.extract({ sessionId, dest, signal: ctx.signal });
  if (got === undefined) throw new InputUnreadableError('the live session archived nothing to record');
  ctx.log.info({ session: sessionId, secs: got.durationSecs }, 'recording: the session archive extracted');
  return new FileInput(dest);
}
