// Where a stream is pushed while live (its multistream targets): each attached target by its
// saved name (GET /api/multistream/target) with the rendition it gets, removable; and a form
// that saves a new target and attaches it in one call (POST
// /api/stream/{id}/create-multistream-target with a spec). A target's URL holds the other
// service's stream key: typed into a password field, sent once, never shown again (the API
// never answers it).

import { useId, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { Button, describedBy, ErrorText, Field } from '../components/index.ts';
import { useAction, useLoad } from '../hooks.ts';
import type { MultistreamTarget, Stream } from '../wire.ts';

type Attached = Stream['multistream']['targets'][number];

function renditionWords(t: Attached): string {
  return `${t.profile === 'source' ? 'the source' : t.profile}${t.videoOnly ? ', video only' : ''}`;
}

function TargetRow(props: { stream: Stream; target: Attached; name: string; onChanged(): Promise<void> }) {
  const { busy, error, run } = useAction(async () => {
    const { stream, target } = props;
    await api(
      'DELETE',
      `/api/stream/${encodeURIComponent(stream.id)}/multistream/${encodeURIComponent(target.id ?? '')}`,
    );
    await props.onChanged();
  });
  return (
    <li class="restream-target">
      <span>
        <strong>{props.name}</strong> <span class="hint">({renditionWords(props.target)})</span>
      </span>
      <Button busy={busy} onClick={run} aria-label={`Remove ${props.name}`}>
        Remove
      </Button>
      <ErrorText error={error} />
    </li>
  );
}

/** The form's fields; the URL is cleared once sent. */
function AddTarget({ stream, onChanged }: { stream: Stream; onChanged(): Promise<void> }) {
  const id = useId();
  const [name, setName] = useState('');
  const [url, setUrl] = useState('');
  const [profile, setProfile] = useState('source');
  const [videoOnly, setVideoOnly] = useState(false);
  const { busy, error, run } = useAction(async () => {
    const body = { profile, videoOnly, spec: { url, ...(name ? { name } : {}) } };
    await api('POST', `/api/stream/${encodeURIComponent(stream.id)}/create-multistream-target`, body);
    setUrl('');
    setName('');
    await onChanged();
  });
  const submit = (ev: Event) => {
    ev.preventDefault();
    void run();
  };
  const renditions = ['source', ...stream.profiles.map((p) => p.name)];
  const urlHint = 'rtmp://, rtmps:// or srt://, with the other service’s stream key: never shown again.';
  return (
    <form onSubmit={submit} class="restream-form" aria-label="Add a restream target">
      <Field id={`${id}-name`} label="Target name">
        <input id={`${id}-name`} value={name} onInput={(e) => setName(e.currentTarget.value)} maxLength={256} />
      </Field>
      <Field id={`${id}-url`} label="Target URL" hint={urlHint}>
        <input
          id={`${id}-url`}
          type="password"
          autoComplete="off"
          required
          value={url}
          onInput={(e) => setUrl(e.currentTarget.value)}
          aria-describedby={describedBy(`${id}-url`, { hint: urlHint })}
        />
      </Field>
      <Field id={`${id}-profile`} label="Rendition pushed (copied, not encoded again)">
        <select id={`${id}-profile`} value={profile} onChange={(e) => setProfile(e.currentTarget.value)}>
          {renditions.map((r) => (
            <option key={r} value={r}>
              {r === 'source' ? 'the source' : r}
            </option>
          ))}
        </select>
      </Field>
      <Field id={`${id}-video`} label="Video only" inline>
        <input
          id={`${id}-video`}
          type="checkbox"
          checked={videoOnly}
          onChange={(e) => setVideoOnly(e.currentTarget.checked)}
        />
      </Field>
      <Button type="submit" busy={busy}>
        Add target
      </Button>
      <ErrorText error={error} />
    </form>
  );
}

export function StreamRestream({ stream, onChanged }: { stream: Stream; onChanged(): Promise<void> }) {
  const targets = stream.multistream.targets;
  const saved = useLoad(() => api<MultistreamTarget[]>('GET', '/api/multistream/target'), [targets.length]);
  const nameOf = (t: Attached) => saved.data?.find((s) => s.id === t.id)?.name ?? 'a saved target';
  const changed = async () => {
    await onChanged();
    await saved.reload();
  };
  return (
    <section class="card" aria-labelledby="restream-h">
      <h2 id="restream-h">Restream</h2>
      <p class="hint">While live, each target gets the rendition it names, over RTMP(S) or SRT.</p>
      {targets.length === 0 ? (
        <p>No targets: the stream is pushed nowhere else.</p>
      ) : (
        <ul class="restream-targets">
          {targets.map((t) => (
            <TargetRow key={t.id} stream={stream} target={t} name={nameOf(t)} onChanged={changed} />
          ))}
        </ul>
      )}
      <ErrorText error={saved.error} />
      <AddTarget stream={stream} onChanged={changed} />
    </section>
  );
}
