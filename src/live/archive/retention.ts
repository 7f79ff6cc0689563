import type { Db } from '../../db/index.ts';
import type { SweepJob } from '../../lib/sweep.ts';
import type { BuiltinStore } from '../../storage/builtin/index.ts';
import { ArchiveIndex } from './archive-index.ts';
import { archiveMinutePrefix, archiveSessionPrefix } from './keys.ts';

// How long the live archive keeps a session's source (MEDIAPLANE_LIVE_CLIP_SECS): a session
// that is not recorded keeps its last `clipSecs` for live clips, dropped a whole wall-clock
// minute at a time; a recorded one keeps all of it until its recording asset is ready,
// failed or deleted, then `clipSecs` more. The index row goes after its objects, so a sweep
// cut short leaves objects to remove again, never an index naming objects that are gone
// for long (an extract that meets one fails and is retried as any job).

export interface ArchiveRetentionDeps {
  db: Db;
  store: BuiltinStore;
  clipSecs: number;
}

/** The retention sweep's job (lib/sweep.ts): sessions trimmed per batch. */
export function archiveRetentionJob(d: ArchiveRetentionDeps): SweepJob {
  const index = new ArchiveIndex(d.db);
  return {
    name: 'live_archive_sessions',
    run: async (limit) => {
      const sessions = await index.trimmable({ keepMs: d.clipSecs * 1000, limit });
      let trimmed = 0;
      for (const s of sessions) {
        const minutes = await index.minutesBefore(s.sessionId, s.beforeMs);
        for (const minute of minutes) {
          await d.store.removePrefix(archiveMinutePrefix(s.sessionId, minute));
          await index.removeMinute(s.sessionId, minute);
        }
        // Nothing left: the init segments go too.
        if (!(await index.any(s.sessionId))) await d.store.removePrefix(archiveSessionPrefix(s.sessionId));
        if (minutes.length > 0) trimmed++;
      }
      return trimmed;
    },
  };
}
