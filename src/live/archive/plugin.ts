import type { Db } from '../../db/index.ts';
import type { BuiltinStore } from '../../storage/builtin/index.ts';
import { SOURCE_RENDITION } from '../profiles.ts';
import type { RenditionTap, SessionPlugin, SessionPluginFactory, SessionView } from '../session-plugins.ts';
import { ArchiveIndex } from './archive-index.ts';
import { ArchiveWriter } from './writer.ts';

// The archive rides along every session: its source rendition (the publisher's video copied,
// not encoded; the only rendition there is when the source could not be copied) is written
// to the built-in store as it arrives, for the session's recording (when the stream records)
// and for live clips (the last MEDIAPLANE_LIVE_CLIP_SECS of any stream). A session continued
// on another node is archived there under the same session id: runs are numbered from the
// wall clock (llhls/names.ts), so the other node's come after this one's.

export interface ArchivePluginDeps {
  store: BuiltinStore;
  db: Db;
  /** MEDIAPLANE_LIVE_CLIP_SECS (the retention sweep keeps that much of a session not recorded). */
  clipSecs: number;
  /** Bytes queued for the store before parts are dropped (writer.ts's default). */
  maxQueuedBytes?: number;
}

/** The session's issue when the store falls behind (recordings and clips then miss those seconds). */
export const DROP_ISSUE =
  'the built-in store fell behind the live archive: some seconds of the source were not kept (the recording and clips miss them)';

/** The archive's plug-in factory for the live node (main.ts). */
export function archivePlugin(deps: ArchivePluginDeps): SessionPluginFactory {
  const index = new ArchiveIndex(deps.db);
  return (view) => new ArchivePlugin(deps, index, view);
}

class ArchivePlugin implements SessionPlugin {
  readonly #writer: ArchiveWriter;
  readonly #view: SessionView;
  /** The rendition archived: `source` when there is one, else the first offered. */
  #chosen: string | undefined;

  constructor(deps: ArchivePluginDeps, index: ArchiveIndex, view: SessionView) {
    this.#view = view;
    this.#writer = new ArchiveWriter({
      store: deps.store,
      index,
      sessionId: view.sessionId,
      log: view.log,
      onDrop: () => view.issue?.(DROP_ISSUE),
      ...(deps.maxQueuedBytes === undefined ? {} : { maxQueuedBytes: deps.maxQueuedBytes }),
    });
  }

  rendition(name: string, tap: (t: RenditionTap) => void): void {
    // The ladder makes every rendition before its ffmpeg writes a byte: the choice is settled
    // by the time the first init comes, and a rendition passed over ignores what it is told.
    if (this.#chosen === undefined || name === SOURCE_RENDITION) this.#chosen = name;
    const writer = this.#writer;
    const mine = () => this.#chosen === name;
    tap({
      init: (run, bytes) => {
        if (mine()) writer.init(run, bytes);
      },
      part: (p) => {
        if (mine()) writer.part(p);
      },
      end: () => {},
    });
  }

  async end(): Promise<void> {
    await this.#writer.close();
    const s = this.#writer.stats;
    this.#view.log.info(
      { session: this.#view.sessionId, written: s.written, dropped: s.dropped, failed: s.failed },
      'live archive: session archived on this node',
    );
  }
}
