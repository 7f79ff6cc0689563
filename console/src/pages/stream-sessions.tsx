// A stream's sessions (GET /api/stream/{id}/sessions, newest first): one per publish, a
// publisher back within the reconnect window continuing the same one. For a recorded session,
// its recording's state and, once it is made, a link to its asset (the asset's id is the
// session's) and to its MP4. Read again whenever the stream goes live or idle, and every few
// seconds while a recording is still being made.

import { api } from '../api.ts';
import { ErrorText } from '../components/index.ts';
import { dateTime, duration } from '../format.ts';
import { useInterval, useLoad, useVisible } from '../hooks.ts';
import { href } from '../router.ts';
import type { Session, Stream } from '../wire.ts';

const POLL_MS = 5000;

function RecordingCell({ session }: { session: Session }) {
  const status = session.recordingStatus ?? 'none';
  if (status === 'none') return <span class="hint">not recorded</span>;
  if (status === 'ready')
    return (
      <span class="session-links">
        <a href={href('assets', session.id)}>Recording</a>
        {session.mp4Url && (
          <a href={session.mp4Url} download>
            MP4
          </a>
        )}
      </span>
    );
  if (status === 'failed')
    return (
      <a href={href('assets', session.id)} class="badge badge-failed">
        recording failed
      </a>
    );
  if (status === 'deleted') return <span class="badge badge-stopped">recording deleted</span>;
  return <span class="badge badge-busy">recording: waiting</span>;
}

function SessionRows({ sessions }: { sessions: Session[] }) {
  return (
    <table class="stream-table session-table">
      <thead>
        <tr>
          <th scope="col">Started</th>
          <th scope="col">Last seen</th>
          <th scope="col">Length</th>
          <th scope="col">Recording</th>
        </tr>
      </thead>
      <tbody>
        {sessions.map((s) => (
          <tr key={s.id}>
            <td data-label="Started">{dateTime(s.createdAt)}</td>
            <td data-label="Last seen">{s.lastSeen ? dateTime(s.lastSeen) : '–'}</td>
            <td data-label="Length">{s.sourceSegmentsDuration ? duration(s.sourceSegmentsDuration) : '–'}</td>
            <td data-label="Recording">
              <RecordingCell session={s} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function StreamSessions({ stream }: { stream: Stream }) {
  const loaded = useLoad(
    () => api<Session[]>('GET', `/api/stream/${encodeURIComponent(stream.id)}/sessions`),
    [stream.id, stream.isActive],
  );
  const making = (loaded.data ?? []).some((s) => s.recordingStatus === 'waiting');
  useInterval(() => void loaded.reload(), POLL_MS, useVisible() && (making || stream.isActive));
  const sessions = loaded.data ?? [];
  return (
    <section class="card" aria-labelledby="sessions-h">
      <h2 id="sessions-h">Sessions</h2>
      <p class="hint">
        One per publish; a publisher back within the reconnect window continues its session.
        {stream.record ? ' This stream is recorded: each session becomes an asset when it ends.' : ''}
      </p>
      <ErrorText error={loaded.error} />
      {loaded.data && sessions.length === 0 && <p>None yet: the stream has never been live.</p>}
      {sessions.length > 0 && <SessionRows sessions={sessions} />}
    </section>
  );
}
