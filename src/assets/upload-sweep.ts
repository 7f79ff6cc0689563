import type { SweepJob } from '../lib/sweep.ts';
import type { UploadStaging } from './staging.ts';
import type { UploadSessions } from './types.ts';

// Unfinished uploads do not keep their bytes (issue #27): a Sweeper (lib/sweep.ts) in each
// process with the API role runs these jobs. A staging folder is that process's; a bucket is
// every process's, so each sweeps all of it (dropping an upload twice is no error).

/**
 * The sweep jobs of uploads: `upload_expiry` fails the uploads past their URL's expiry (their
 * task and asset fail; sessions.expire) and frees what they staged here; `upload_staging` frees
 * what is left in the staging area (this process's folder, or the bucket) past its URL's expiry, whatever the reason
 * (an asset deleted mid-upload, an upload expired by another process's sweep, a crash between
 * the store and the database); `upload_ended` frees, before their URL expires, the bytes of
 * uploads that can take no more (their asset deleted or failed), and their owner's allowance.
 */
export function uploadSweepJobs(
  sessions: Pick<UploadSessions, 'expire' | 'ended'>,
  staging: UploadStaging,
): SweepJob[] {
  return [
    {
      name: 'upload_expiry',
      run: async (limit) => {
        const expired = await sessions.expire(limit);
        for (const assetId of expired) await staging.remove(assetId);
        return expired.length;
      },
    },
    { name: 'upload_staging', run: (limit) => staging.removeStale(limit) },
    { name: 'upload_ended', run: (limit) => staging.removeEnded(limit, (ids) => sessions.ended(ids)) },
  ];
}
