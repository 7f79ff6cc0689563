import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { PhaseBadge, Progress } from '../components/index.ts';
import { useInterval } from '../hooks.ts';
import { href } from '../router.ts';
import { settling } from '../phases.ts';
import type { Asset, AssetPhase } from '../wire.ts';

// A new asset followed from its bytes to ready (an upload, an import, a clip): GET
// /api/asset/{id} at once and every 2 s while it settles, its phase in words and the
// processing progress the server reports.

const POLL_MS = 2000;

const WORDS: Record<AssetPhase, string> = {
  uploading: 'Receiving the file',
  waiting: 'Waiting for a worker to process it',
  processing: 'Processing: making the renditions',
  ready: 'Ready to play',
  failed: 'Failed',
  deleting: 'Being deleted',
  deleted: 'Deleted',
};

/** The asset as the API shows it now, read again every 2 s until it is ready or failed. */
export function useFollowAsset(id: string, first?: Asset): Asset | undefined {
  const [asset, setAsset] = useState<Asset | undefined>(first);
  const read = () =>
    api<Asset>('GET', `/api/asset/${encodeURIComponent(id)}`)
      .then(setAsset)
      .catch(() => undefined);
  useEffect(() => {
    void read();
  }, [id]);
  useInterval(() => void read(), POLL_MS, asset === undefined || settling(asset));
  return asset;
}

/** Its phase in words, the processing progress, the error words or a link to play it. */
export function AssetStatus({ asset, named = false }: { asset: Asset; named?: boolean }) {
  const { phase, progress, errorMessage } = asset.status;
  return (
    <div class="asset-status">
      <div class="row" role="status">
        {named && <a href={href('assets', asset.id)}>{asset.name}</a>}
        <PhaseBadge phase={phase} /> <span>{WORDS[phase]}</span>
        {phase === 'ready' && !named && <a href={href('assets', asset.id)}>Play {asset.name}</a>}
        {/* A long asset plays before the end, once its first parts are in. */}
        {phase === 'processing' && asset.playableAt !== undefined && !named && (
          <a href={href('assets', asset.id)}>Play {asset.name} while it is processing</a>
        )}
      </div>
      {phase === 'processing' && <Progress value={progress ?? 0} label={`${asset.name}: processing`} />}
      {errorMessage && <p class="error">{errorMessage}</p>}
    </div>
  );
}

/** A created asset, followed until it settles: its name (a link) and its status. */
export function FollowedAsset({ id, first, named }: { id: string; first?: Asset; named?: boolean }) {
  const asset = useFollowAsset(id, first);
  if (!asset) return <p class="hint">Reading the asset…</p>;
  return <AssetStatus asset={asset} named={named ?? false} />;
}
