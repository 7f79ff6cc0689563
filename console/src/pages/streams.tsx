// Streams: the list (GET /api/stream, Link paging as the other lists) with a form to create
// one (POST /api/stream); `#/streams/ID` is one stream: its ingest URLs and key, its state
// followed while the page is open, its player, suspend and delete (stream.tsx).
// The list polls every 5 s while the tab is visible, so a stream going live or idle shows
// without a reload: one request however many streams there are.

import { useId, useRef, useState } from 'preact/hooks';
import { api, apiRaw, nextLink } from '../api.ts';
import { Button, describedBy, ErrorText, Field } from '../components/index.ts';
import { dateTime } from '../format.ts';
import { useAction, useInterval, useLoad, useVisible } from '../hooks.ts';
import { href, navigate, type PageProps } from '../router.ts';
import type { Stream, StreamBody } from '../wire.ts';
import { StreamPage } from './stream.tsx';
import { healthWords, StreamBadge } from './stream-parts.tsx';

const PAGE = 20;
const POLL_MS = 5000;

/** `#/streams` lists them, `#/streams/ID` shows one. */
export function StreamsPage({ route }: PageProps) {
  return route[0] ? <StreamPage id={route[0]} /> : <StreamList />;
}

function StreamRows({ streams }: { streams: Stream[] }) {
  return (
    <table class="stream-table">
      <thead>
        <tr>
          <th scope="col">Name</th>
          <th scope="col">State</th>
          <th scope="col">Health</th>
          <th scope="col">Created</th>
        </tr>
      </thead>
      <tbody>
        {streams.map((s) => (
          <tr key={s.id}>
            <td data-label="Name" class="wrap">
              <a href={href('streams', s.id)}>{s.name}</a>
            </td>
            <td data-label="State">
              <StreamBadge stream={s} />
            </td>
            <td data-label="Health">{healthWords(s)}</td>
            <td data-label="Created">{dateTime(s.createdAt)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function useStreamList() {
  const [more, setMore] = useState<Stream[]>([]);
  const [next, setNext] = useState<string | undefined>(undefined);
  const [moreError, setMoreError] = useState<unknown>(undefined);
  // Once a further page is loaded, the cursor is that page's: a refresh of the first page keeps it.
  const paged = useRef(false);
  const list = useLoad(async () => {
    const res = await apiRaw('GET', `/api/stream?limit=${PAGE}`);
    if (!paged.current) setNext(nextLink(res));
    return (await res.json()) as Stream[];
  }, []);
  const loadMore = async () => {
    if (!next) return;
    paged.current = true;
    try {
      const res = await apiRaw('GET', next);
      const page = (await res.json()) as Stream[];
      setMore((p) => [...p, ...page]);
      setNext(nextLink(res));
      setMoreError(undefined);
    } catch (e) {
      setMoreError(e);
    }
  };
  useInterval(() => void list.reload(), POLL_MS, useVisible());
  const first = list.data ?? [];
  const ids = new Set(first.map((s) => s.id));
  const streams = [...first, ...more.filter((s) => !ids.has(s.id))];
  return { list, streams, next, moreError, loadMore };
}

function NewStream() {
  const nameId = useId();
  const ladderId = useId();
  const [name, setName] = useState('');
  const [sourceOnly, setSourceOnly] = useState(false);
  const create = useAction(async () => {
    // No profiles: the server's default ladder; [] is the source alone (Livepeer's meaning).
    const body: StreamBody = sourceOnly ? { name: name.trim(), profiles: [] } : { name: name.trim() };
    const made = await api<Stream>('POST', '/api/stream', body);
    navigate('streams', made.id);
  });
  const { busy, error } = create;
  const submit = (e: Event) => {
    e.preventDefault();
    void create.run();
  };
  const hint = 'Never above the source: a 480p source gets the rungs up to 480p.';
  return (
    <section aria-labelledby="new-stream" class="card">
      <h2 id="new-stream">New stream</h2>
      <form onSubmit={submit} class="stream-form">
        <Field id={nameId} label="Name" error={error}>
          <input
            id={nameId}
            required
            maxLength={256}
            value={name}
            onInput={(e) => setName(e.currentTarget.value)}
            aria-invalid={error ? true : undefined}
            aria-describedby={describedBy(nameId, { error })}
          />
        </Field>
        <fieldset class="ladder" aria-describedby={`${ladderId}-hint`}>
          <legend>Renditions</legend>
          <div class="field field-inline">
            <input
              id={`${ladderId}-default`}
              type="radio"
              name="ladder"
              checked={!sourceOnly}
              onChange={() => setSourceOnly(false)}
            />
            <label class="choice" for={`${ladderId}-default`}>
              The default ladder: 240p, 360p, 480p and 720p, and the source
            </label>
          </div>
          <div class="field field-inline">
            <input
              id={`${ladderId}-source`}
              type="radio"
              name="ladder"
              checked={sourceOnly}
              onChange={() => setSourceOnly(true)}
            />
            <label class="choice" for={`${ladderId}-source`}>
              The source alone (no transcoding)
            </label>
          </div>
          <div class="hint" id={`${ladderId}-hint`}>
            {hint}
          </div>
        </fieldset>
        <Button type="submit" variant="primary" busy={busy}>
          Create stream
        </Button>
      </form>
    </section>
  );
}

function StreamList() {
  const { list, streams, next, moreError, loadMore } = useStreamList();
  return (
    <section>
      <h1>Streams</h1>
      <p class="hint">
        Live sources you publish over RTMP or SRT (from OBS or ffmpeg), played as low-latency HLS. The list updates
        every 5 seconds.
      </p>
      <ErrorText error={list.error} />
      {list.loading && !list.data && <p role="status">Loading…</p>}
      {list.data && streams.length === 0 && <p>No streams yet: create one below.</p>}
      {streams.length > 0 && <StreamRows streams={streams} />}
      <ErrorText error={moreError} />
      {next && <Button onClick={loadMore}>Load more</Button>}
      <NewStream />
    </section>
  );
}
