import { useEffect, useId, useState } from 'preact/hooks';
import { api, apiRaw, nextLink } from '../api.ts';
import { Button, ErrorText, PhaseBadge, Progress } from '../components/index.ts';
import { bytes, dateTime, duration } from '../format.ts';
import { useInterval } from '../hooks.ts';
import { href } from '../router.ts';
import { settling } from '../phases.ts';
import type { Asset, PlaybackInfo } from '../wire.ts';

export { AssetPage } from './asset.tsx';

// The list of assets, kept live by polling GET /api/asset every 2 s while any of them is
// still uploading, waiting or processing: one request whatever the number of assets, and
// the list answer already carries each phase and progress (an SSE stream per task would
// be one connection per processing asset, and browsers allow six per host on HTTP/1.1).

const POLL_MS = 2000;
const PAGE = 100;

/** Posters by playbackId: the playback info's `Thumbnail (JPEG)`, asked once per asset. */
const posters = new Map<string, Promise<string | undefined>>();
function posterOf(a: Asset): Promise<string | undefined> {
  let p = posters.get(a.playbackId);
  if (!p) {
    p = api<PlaybackInfo>('GET', `/api/playback/${encodeURIComponent(a.playbackId)}`)
      .then((info) => info.meta.source.find((s) => s.hrn === 'Thumbnail (JPEG)')?.url)
      .catch(() => undefined);
    posters.set(a.playbackId, p);
  }
  return p;
}

function Poster({ asset }: { asset: Asset }) {
  const [url, setUrl] = useState<string | undefined>(undefined);
  const ready = asset.status.phase === 'ready';
  useEffect(() => {
    if (ready && asset.playbackPolicy?.type !== 'jwt') void posterOf(asset).then(setUrl);
  }, [ready, asset]);
  return (
    <div class="poster">
      {url ? <img src={url} alt="" loading="lazy" /> : <span aria-hidden="true">{asset.status.phase}</span>}
    </div>
  );
}

function AssetCard({ asset, onDelete }: { asset: Asset; onDelete(): void }) {
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const del = async () => {
    if (!confirm(`Delete "${asset.name}"? Every stored file of it is removed.`)) return;
    setBusy(true);
    try {
      await api('DELETE', `/api/asset/${encodeURIComponent(asset.id)}`);
      onDelete();
    } catch (e) {
      setError(e);
      setBusy(false);
    }
  };
  const { phase, progress, errorMessage } = asset.status;
  return (
    <li class="asset-card">
      <Poster asset={asset} />
      <div class="body">
        <a class="title" href={href('assets', asset.id)}>
          {asset.name}
        </a>
        <div class="meta">
          <PhaseBadge phase={asset.status.phase} /> {duration(asset.videoSpec?.duration)} {bytes(asset.size)}
        </div>
        {phase === 'processing' && <Progress value={progress ?? 0} label={`${asset.name}: processing`} />}
        {errorMessage && <div class="error">{errorMessage}</div>}
        <div class="meta">{dateTime(asset.createdAt)}</div>
        <div class="row">
          <Button variant="danger" busy={busy} onClick={del} aria-label={`Delete ${asset.name}`}>
            Delete
          </Button>
        </div>
        <ErrorText error={error} />
      </div>
    </li>
  );
}

/** The first page (refreshed) and the pages asked for with "Load more". */
function useAssetList() {
  const [assets, setAssets] = useState<Asset[] | undefined>(undefined);
  const [next, setNext] = useState<string | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const refresh = async () => {
    try {
      const res = await apiRaw('GET', `/api/asset?limit=${PAGE}`);
      const first = (await res.json()) as Asset[];
      setAssets((old) => {
        const ids = new Set(first.map((a) => a.id));
        const rest = (old ?? []).slice(PAGE).filter((a) => !ids.has(a.id));
        return [...first, ...rest];
      });
      setNext((n) => n ?? nextLink(res));
      setError(undefined);
    } catch (e) {
      setError(e);
    }
  };
  const more = async () => {
    if (!next) return;
    try {
      const res = await apiRaw('GET', next);
      const page = (await res.json()) as Asset[];
      setAssets((old) => [...(old ?? []), ...page]);
      setNext(nextLink(res));
    } catch (e) {
      setError(e);
    }
  };
  const remove = (id: string) => setAssets((old) => old?.filter((a) => a.id !== id));
  useEffect(() => {
    void refresh();
  }, []);
  useInterval(refresh, POLL_MS, Boolean(assets?.some(settling)));
  return { assets, next, error, more, remove };
}

export function AssetsPage() {
  const searchId = useId();
  const [query, setQuery] = useState('');
  const { assets, next, error, more, remove } = useAssetList();
  const q = query.trim().toLowerCase();
  const shown = assets?.filter((a) => !q || a.name.toLowerCase().includes(q));
  return (
    <section>
      <h1>Assets</h1>
      <search class="row">
        <label for={searchId}>Search by name</label>
        <input id={searchId} type="search" value={query} onInput={(e) => setQuery(e.currentTarget.value)} />
        <a href={href('upload')}>Upload videos</a>
      </search>
      <ErrorText error={error} />
      {assets === undefined && !error && <p>Loading…</p>}
      {assets?.length === 0 && (
        <p>
          No assets yet. <a href={href('upload')}>Upload one</a>.
        </p>
      )}
      {shown && assets && assets.length > 0 && (
        <p class="hint" role="status">
          {shown.length} of {assets.length} shown
        </p>
      )}
      <ul class="assets" aria-label="Assets">
        {shown?.map((a) => (
          <AssetCard key={a.id} asset={a} onDelete={() => remove(a.id)} />
        ))}
      </ul>
      {next && (
        <p>
          <Button onClick={more}>Load more</Button>
        </p>
      )}
    </section>
  );
}
