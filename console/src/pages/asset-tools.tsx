import { useId, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { assetExport } from '../asset-export.ts';
import { useCapabilities } from '../capabilities.ts';
import { Button, describedBy, ErrorText, FeatureOff, Field } from '../components/index.ts';
import { duration } from '../format.ts';
import { href } from '../router.ts';
import { FollowedAsset } from '../widgets/FollowedAsset.tsx';
import type { Asset, Task } from '../wire.ts';

// The asset page's tools that change something: the clip maker (POST /api/clip) and the
// export to IPFS (POST /api/asset/{id}/export), offered where the server has a Storacha
// space for exports (GET /api/capabilities) and explained where it has not.

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
      const res = await api<{ asset: Asset; task: Task }>('POST', '/api/clip', body);
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
            <FollowedAsset key={a.id} id={a.id} first={a} named />
          ))}
        </div>
      )}
    </form>
  );
}

export function ExportIpfs({ asset, onStarted }: { asset: Asset; onStarted(): void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [task, setTask] = useState<Task | undefined>(undefined);
  const run = async () => {
    setBusy(true);
    setError(undefined);
    try {
      const res = await api<{ task: Task }>('POST', `/api/asset/${encodeURIComponent(asset.id)}/export`, {
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
  const done = assetExport(asset);
  const caps = useCapabilities();
  return (
    <section class="card" aria-labelledby={`export-${asset.id}`}>
      <h2 id={`export-${asset.id}`}>Export to IPFS</h2>
      {done.phase && (
        <p role="status">
          Export: {done.phase}
          {done.errorMessage && <span class="error"> {done.errorMessage}</span>}
        </p>
      )}
      {done.cid && (
        <p>
          CID <code>{done.cid}</code>
          {done.gatewayUrl && (
            <>
              {' '}
              <a href={done.gatewayUrl} target="_blank" rel="noreferrer">
                Open on the gateway
              </a>
            </>
          )}
        </p>
      )}
      {caps?.ipfsExport.enabled && (
        <>
          <p class="hint">Puts the original file on IPFS, in the server's Storacha space.</p>
          <Button onClick={run} busy={busy}>
            Export to IPFS
          </Button>
        </>
      )}
      {caps && !caps.ipfsExport.enabled && (
        <FeatureOff title="Exporting to the server's IPFS space" feature={caps.ipfsExport}>
          {caps.ipfsExport.ownProof && (
            <p class="hint">
              An export to your own Storacha space works already: <code>POST /api/asset/{'{id}'}/export</code> with{' '}
              <code>ipfs.credentials.proof</code>, a delegation of your space to this server's agent.
            </p>
          )}
        </FeatureOff>
      )}
      <ErrorText error={error} />
      {task && (
        <p role="status">
          Export task <a href={href('tasks', task.id)}>{task.id}</a> started.
        </p>
      )}
    </section>
  );
}
