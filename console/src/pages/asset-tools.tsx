import { useId, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { Button, describedBy, ErrorText, Field, PhaseBadge, Progress } from '../components/index.ts';
import { duration } from '../format.ts';
import { useInterval } from '../hooks.ts';
import { href } from '../router.ts';
import { type Asset, settling, type TaskRef } from '../types.ts';

// The asset page's tools that change something: the clip maker (POST /api/clip) and the
// export to IPFS (POST /api/asset/{id}/export).

/** A created asset followed until it settles (GET /api/asset/{id} every 2 s). */
function FollowAsset({ asset: first }: { asset: Asset }) {
  const [asset, setAsset] = useState(first);
  useInterval(
    () => {
      api<Asset>('GET', `/api/asset/${encodeURIComponent(asset.id)}`)
        .then(setAsset)
        .catch(() => undefined);
    },
    2000,
    settling(asset),
  );
  return (
    <div class="row">
      <a href={href('assets', asset.id)}>{asset.name}</a> <PhaseBadge phase={asset.status.phase} />
      {asset.status.phase === 'processing' && (
        <Progress value={asset.status.progress ?? 0} label={`${asset.name}: processing`} />
      )}
      {asset.status.errorMessage && <span class="error">{asset.status.errorMessage}</span>}
    </div>
  );
}

function TimeField(props: {
  label: string;
  value: number;
  onChange(v: number): void;
  onMark(): void;
  error?: unknown;
}) {
  const id = useId();
  return (
    <Field id={id} label={props.label} error={props.error}>
      <div class="row">
        <input
          id={id}
          type="number"
          min={0}
          step={0.1}
          value={props.value.toFixed(1)}
          style={{ width: '7rem' }}
          aria-describedby={describedBy(id, { error: props.error })}
          onChange={(e) => props.onChange(Number(e.currentTarget.value))}
        />
        <Button onClick={props.onMark}>Mark {props.label.split(' ')[0]?.toLowerCase()} here</Button>
      </div>
    </Field>
  );
}

export function ClipMaker({ asset, video }: { asset: Asset; video: HTMLVideoElement | null }) {
  const nameId = useId();
  const [start, setStart] = useState(0);
  const [end, setEnd] = useState(Math.min(2, asset.videoSpec?.duration ?? 2));
  const [name, setName] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [made, setMade] = useState<Asset[]>([]);
  const now = () => video?.currentTime ?? 0;
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const body: Record<string, unknown> = {
        playbackId: asset.playbackId,
        startTime: Math.round(start * 1000),
        endTime: Math.round(end * 1000),
      };
      if (name.trim()) body.name = name.trim();
      const res = await api<{ asset: Asset; task: TaskRef }>('POST', '/api/clip', body);
      setMade((m) => [res.asset, ...m]);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card" onSubmit={submit} aria-labelledby={`${nameId}-h`}>
      <h2 id={`${nameId}-h`}>Make a clip</h2>
      <p class="hint">Play or seek to a moment, then mark it. Times are seconds.</p>
      <TimeField label="In (seconds)" value={start} onChange={setStart} onMark={() => setStart(now())} />
      <TimeField label="Out (seconds)" value={end} onChange={setEnd} onMark={() => setEnd(now())} />
      <Field id={nameId} label="Clip name (optional)">
        <input id={nameId} type="text" value={name} onInput={(e) => setName(e.currentTarget.value)} />
      </Field>
      <p class="hint">Length {duration(Math.max(0, end - start))}</p>
      <Button type="submit" variant="primary" busy={busy}>
        Make clip
      </Button>
      <ErrorText error={error} />
      {made.length > 0 && (
        <div role="status" aria-label="Clips">
          {made.map((a) => (
            <FollowAsset key={a.id} asset={a} />
          ))}
        </div>
      )}
    </form>
  );
}

export function ExportIpfs({ asset, onStarted }: { asset: Asset; onStarted(): void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [task, setTask] = useState<TaskRef | undefined>(undefined);
  const run = async () => {
    setBusy(true);
    setError(undefined);
    try {
      const res = await api<{ task: TaskRef }>('POST', `/api/asset/${encodeURIComponent(asset.id)}/export`, {
        ipfs: {},
      });
      setTask(res.task);
      onStarted();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const storage = asset.storage;
  return (
    <section class="card" aria-labelledby={`export-${asset.id}`}>
      <h2 id={`export-${asset.id}`}>Export to IPFS</h2>
      <p class="hint">Puts the original file on IPFS with the server's Storacha space.</p>
      {storage?.status?.phase && (
        <p role="status">
          Export: {storage.status.phase}
          {storage.status.errorMessage && <span class="error"> {storage.status.errorMessage}</span>}
        </p>
      )}
      {storage?.ipfs?.cid && (
        <p>
          CID <code>{storage.ipfs.cid}</code>
          {storage.ipfs.gatewayUrl && (
            <>
              {' '}
              <a href={storage.ipfs.gatewayUrl} target="_blank" rel="noreferrer">
                Open on the gateway
              </a>
            </>
          )}
        </p>
      )}
      <Button onClick={run} busy={busy}>
        Export to IPFS
      </Button>
      <ErrorText error={error} />
      {task && (
        <p role="status">
          Export task <a href={href('tasks', task.id)}>{task.id}</a> started.
        </p>
      )}
    </section>
  );
}
