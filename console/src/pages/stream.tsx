// One stream: where to publish (stream-ingest.tsx), its state followed while the page is open
// (GET /api/stream/{id} every 3 s while the tab is visible: the API has no event stream for
// streams, and one small read is cheap), its health, issues and counters, a low-latency
// player while it is live, a clip of the last 30 s while live (stream-clip.tsx), its sessions
// and their recordings (stream-sessions.tsx), where it is restreamed (stream-restream.tsx),
// and suspend, resume and delete (stream-actions.tsx).

import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { ErrorText, Player } from '../components/index.ts';
import { bitRate, bytes, dateTime, duration } from '../format.ts';
import { useInterval, useLoad, useVisible } from '../hooks.ts';
import { href } from '../router.ts';
import type { PlaybackInfo, Stream } from '../wire.ts';
import { StreamActions } from './stream-actions.tsx';
import { StreamClip } from './stream-clip.tsx';
import { StreamIngest } from './stream-ingest.tsx';
import { healthWords, StreamBadge } from './stream-parts.tsx';
import { StreamRestream } from './stream-restream.tsx';
import { StreamSessions } from './stream-sessions.tsx';

const POLL_MS = 3000;
/** How often the player's page asks whether the first parts of every rendition are there. */
const PROBE_MS = 1000;

function segmentsLine(count: number | undefined, secs: number | undefined, size: number | undefined): string {
  if (!count) return 'none yet';
  return `${count} (${duration(secs)}, ${bytes(size)})`;
}

function ladderWords(s: Stream): string {
  if (s.profiles.length === 0) return 'the source alone';
  // The runtime leaves out the rungs taller than the source (live/profiles.ts rungsFor).
  return `${s.profiles.map((p) => p.name).join(', ')} (those up to the source's height), and the source`;
}

function State({ stream }: { stream: Stream }) {
  const issues = stream.issues ?? [];
  return (
    <section class="card" aria-labelledby="state-h">
      <h2 id="state-h">State</h2>
      <dl class="props">
        <dt>State</dt>
        {/* Said when it changes (live, idle); the counters below change too often to be read out. */}
        <dd>
          <span role="status">
            <StreamBadge stream={stream} />
          </span>
        </dd>
        <dt>Health</dt>
        <dd>{healthWords(stream)}</dd>
        <dt>Issues</dt>
        <dd>
          {issues.length === 0 ? (
            'none'
          ) : (
            <ul class="issues">
              {issues.map((i) => (
                <li key={i}>{i}</li>
              ))}
            </ul>
          )}
        </dd>
        <dt>Last seen</dt>
        <dd>{stream.lastSeen ? dateTime(stream.lastSeen) : 'never'}</dd>
        <dt>Ingest rate</dt>
        <dd>{stream.isActive ? bitRate(stream.ingestRate ?? 0) : '–'}</dd>
        <dt>Source segments</dt>
        <dd>{segmentsLine(stream.sourceSegments, stream.sourceSegmentsDuration, stream.sourceBytes)}</dd>
        <dt>Transcoded segments</dt>
        <dd>{segmentsLine(stream.transcodedSegments, stream.transcodedSegmentsDuration, stream.transcodedBytes)}</dd>
        <dt>Renditions</dt>
        <dd>{ladderWords(stream)}</dd>
        <dt>Playback ID</dt>
        <dd>
          <code>{stream.playbackId}</code>
        </dd>
        <dt>Created</dt>
        <dd>{dateTime(stream.createdAt)}</dd>
      </dl>
    </section>
  );
}

/**
 * The stream's HLS URL once its multivariant playlist answers: the service answers it when every
 * rendition has its first part, a second or two after the publish starts.
 */
function useLiveSource(stream: Stream): { url: string | undefined; error: unknown } {
  const [url, setUrl] = useState<string | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const live = stream.isActive;
  useEffect(() => {
    setUrl(undefined);
    setError(undefined);
    if (!live) return;
    let gone = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const probe = async (hls: string) => {
      // /media needs no key: a plain fetch, as a player's.
      const ok = await fetch(hls).then(
        (r) => r.ok,
        () => false,
      );
      if (gone) return;
      if (ok) setUrl(hls);
      else timer = setTimeout(() => void probe(hls), PROBE_MS);
    };
    void api<PlaybackInfo>('GET', `/api/playback/${encodeURIComponent(stream.playbackId)}`)
      .then((info) => {
        const hls = info.meta.source.find((s) => s.hrn === 'HLS (TS)')?.url;
        if (!gone && hls) void probe(hls);
      })
      .catch((e) => !gone && setError(e));
    return () => {
      gone = true;
      clearTimeout(timer);
    };
  }, [live, stream.playbackId]);
  return { url, error };
}

/** The player while the stream is live; when it fails (the stream ended), the stream is read again at once. */
function LivePlayer({ stream, onFatal }: { stream: Stream; onFatal(): void }) {
  const { url, error } = useLiveSource(stream);
  let body = <p class="hint">Idle: the player starts when the stream goes live.</p>;
  if (stream.playbackPolicy?.type === 'jwt')
    body = <p class="hint">This stream plays with a signed token only (playback policy JWT): the console has none.</p>;
  else if (stream.isActive && url) body = <Player src={url} live onFatal={onFatal} />;
  else if (stream.isActive) body = <p role="status">Live: waiting for the first segments of every rendition…</p>;
  return (
    <section class="card" aria-labelledby="player-h">
      <h2 id="player-h">Watch</h2>
      {body}
      <ErrorText error={error} />
    </section>
  );
}

export function StreamPage({ id }: { id: string }) {
  const loaded = useLoad(() => api<Stream>('GET', `/api/stream/${encodeURIComponent(id)}`), [id]);
  useInterval(() => void loaded.reload(), POLL_MS, useVisible() && loaded.data !== undefined);
  const s = loaded.data;
  return (
    <section>
      <p>
        <a href={href('streams')}>← All streams</a>
      </p>
      <h1>{s?.name ?? 'Stream'}</h1>
      <ErrorText error={loaded.error} />
      {!s && loaded.loading && <p role="status">Loading…</p>}
      {s && (
        <>
          <LivePlayer stream={s} onFatal={() => void loaded.reload()} />
          <StreamClip stream={s} />
          <div class="grid2">
            <StreamIngest stream={s} />
            <State stream={s} />
          </div>
          <StreamSessions stream={s} />
          <StreamRestream stream={s} onChanged={loaded.reload} />
          <StreamActions stream={s} onChanged={loaded.reload} />
        </>
      )}
    </section>
  );
}
