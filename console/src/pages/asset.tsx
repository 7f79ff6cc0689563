import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { assetExport } from '../asset-export.ts';
import { useCapabilities } from '../capabilities.ts';
import { CopyButton, ErrorText, Json, PhaseBadge, Player, Progress } from '../components/index.ts';
import { bytes, dateTime, duration } from '../format.ts';
import { useInterval, useLoad } from '../hooks.ts';
import { href } from '../router.ts';
import { settling } from '../phases.ts';
import type { Asset, PlaybackInfo, PlaybackSource, Track } from '../wire.ts';
import { ClipMaker, ExportIpfs } from './asset-tools.tsx';

// One asset: the player, its downloads, playback info and embed snippet, a clip maker and
// the export to IPFS. The asset is read again every 2 s while it (or its export) settles. A
// long one plays while it is still processing, once its first parts are in (`playableAt`):
// then the player alone, on the playlists that grow until it is ready.

const absolute = (url: string) => new URL(url, location.href).href;

function trackLine(t: Track): string {
  if (t.type === 'video')
    return `video ${t.codec ?? ''} ${t.width ?? '?'}×${t.height ?? '?'} ${t.fps ? `${t.fps} fps` : ''}`;
  return `audio ${t.codec ?? ''} ${t.channels ? `${t.channels} ch` : ''} ${t.sampleRate ? `${t.sampleRate / 1000} kHz` : ''}`;
}

function sourceWords(a: Asset): string {
  if (a.source.type === 'url') return a.source.url;
  if (a.source.type === 'directUpload') return 'a file uploaded here or to its upload URL';
  return 'a clip of another asset';
}

function Info({ asset }: { asset: Asset }) {
  const spec = asset.videoSpec;
  return (
    <dl class="props">
      <dt>Phase</dt>
      <dd>
        <PhaseBadge phase={asset.status.phase} />
      </dd>
      <dt>Playback ID</dt>
      <dd>
        <code>{asset.playbackId}</code>
      </dd>
      {asset.playbackUrl && (
        <>
          <dt>Playback URL</dt>
          <dd>
            <code>{absolute(asset.playbackUrl)}</code>
          </dd>
        </>
      )}
      <dt>Duration</dt>
      <dd>{duration(spec?.duration) || '–'}</dd>
      <dt>Size</dt>
      <dd>{bytes(asset.size) || '–'}</dd>
      {spec?.tracks?.map((t, i) => (
        <TrackRow key={i} line={trackLine(t)} first={i === 0} />
      ))}
      <dt>Access</dt>
      <dd>{asset.playbackPolicy?.type === 'jwt' ? 'private (JWT)' : 'public'}</dd>
      <dt>Created</dt>
      <dd>{dateTime(asset.createdAt)}</dd>
      <dt>Source</dt>
      <dd>{sourceWords(asset)}</dd>
    </dl>
  );
}

function TrackRow({ line, first }: { line: string; first: boolean }) {
  return (
    <>
      <dt>{first ? 'Tracks' : <span class="visually-hidden">Track</span>}</dt>
      <dd>{line}</dd>
    </>
  );
}

function Downloads({ asset, sources }: { asset: Asset; sources: PlaybackSource[] }) {
  const mp4s = sources.filter((s) => s.hrn === 'MP4');
  return (
    <ul>
      {mp4s.map((s) => (
        <li key={s.url}>
          <a href={s.url} download>
            MP4 {s.width && s.height ? `${s.width}×${s.height}` : ''}
          </a>{' '}
          <span class="hint">{bytes(s.size)}</span>
        </li>
      ))}
      {asset.downloadUrl && (
        <li>
          <a href={asset.downloadUrl} download>
            Original file
          </a>{' '}
          <span class="hint">{bytes(asset.size)}</span>
        </li>
      )}
      {mp4s.length === 0 && <li class="hint">No MP4 renditions (upload with "Also make MP4 downloads").</li>}
    </ul>
  );
}

/** The HTML to embed a player: hls.js from this service (GET /player/hls.min.js), never a CDN. */
function embedSnippet(o: { playbackUrl: string; poster: string | undefined; hlsJs: string }): string {
  const url = absolute(o.playbackUrl);
  return [
    `<video id="mediaplane-video" controls playsinline${o.poster ? ` poster="${absolute(o.poster)}"` : ''}></video>`,
    `<script src="${absolute(o.hlsJs)}"></script>`,
    '<script>',
    `  const v = document.getElementById('mediaplane-video'), src = '${url}';`,
    "  if (v.canPlayType('application/vnd.apple.mpegurl')) v.src = src;",
    '  else { const h = new Hls(); h.loadSource(src); h.attachMedia(v); }',
    '</script>',
  ].join('\n');
}

function Embed({ snippet }: { snippet: string }) {
  return (
    <div>
      <label for="embed-snippet">Embed snippet (HTML)</label>
      <textarea id="embed-snippet" class="snippet" readOnly value={snippet} rows={7} />
      <CopyButton text={snippet} label="Copy snippet" />
    </div>
  );
}

function Ready({ asset, info }: { asset: Asset; info: PlaybackInfo }) {
  const [video, setVideo] = useState<HTMLVideoElement | null>(null);
  const src = info.meta.source;
  const hls = src.find((s) => s.hrn === 'HLS (TS)')?.url;
  const poster = src.find((s) => s.hrn === 'Thumbnail (JPEG)')?.url;
  const storyboard = src.find((s) => s.hrn === 'Thumbnails')?.url;
  const hlsJs = useCapabilities()?.player.hlsJsUrl ?? '/player/hls.min.js';
  return (
    <>
      {hls ? (
        <Player src={hls} poster={poster} storyboard={storyboard} onVideo={setVideo} />
      ) : (
        <p>This asset has no HLS rendition to play.</p>
      )}
      <div class="grid2">
        <section class="card" aria-labelledby="downloads-h">
          <h2 id="downloads-h">Downloads</h2>
          <Downloads asset={asset} sources={src} />
        </section>
        <ClipMaker asset={asset} video={video} />
      </div>
      <section class="card" aria-labelledby="embed-h">
        <h2 id="embed-h">Embed</h2>
        {hls && <Embed snippet={embedSnippet({ playbackUrl: hls, poster, hlsJs })} />}
        <Json value={info} label="playback info JSON" />
      </section>
    </>
  );
}

/** A processing asset that plays already: the player, and what it plays. */
function PlayableEarly({ info }: { info: PlaybackInfo }) {
  const hls = info.meta.source.find((s) => s.hrn === 'HLS (TS)')?.url;
  if (!hls) return null;
  return (
    <section class="card" aria-labelledby="early-h">
      <h2 id="early-h">Playable while processing</h2>
      <p role="status">
        The first parts are in: it plays from the start while the rest is encoded, and the player gets more as it goes.
        Downloads, thumbnails and clips come when it is ready.
      </p>
      <Player src={hls} />
    </section>
  );
}

export function AssetPage({ id }: { id: string }) {
  const path = `/api/asset/${encodeURIComponent(id)}`;
  const asset = useLoad(() => api<Asset>('GET', path), [id]);
  const a = asset.data;
  const ready = a?.status.phase === 'ready';
  const early = a?.status.phase === 'processing' && a.playableAt !== undefined;
  const info = useLoad(
    () =>
      (ready || early) && a
        ? api<PlaybackInfo>('GET', `/api/playback/${encodeURIComponent(a.playbackId)}`)
        : Promise.resolve(undefined),
    [ready, early, a?.playbackId],
  );
  const exporting = ['waiting', 'processing'].includes((a && assetExport(a).phase) ?? '');
  useInterval(() => void asset.reload(), 2000, Boolean(a && (settling(a) || exporting)));
  return (
    <section>
      <p>
        <a href={href('assets')}>← All assets</a>
      </p>
      <h1>{a?.name ?? 'Asset'}</h1>
      <ErrorText error={asset.error} />
      {a && a.status.phase === 'processing' && <Progress value={a.status.progress ?? 0} label="Processing" />}
      {a?.status.errorMessage && <p class="error">{a.status.errorMessage}</p>}
      {a && settling(a) && <p role="status">This asset is {a.status.phase}; the page updates by itself.</p>}
      <ErrorText error={info.error} />
      {a && info.data && ready && <Ready asset={a} info={info.data} />}
      {info.data && early && <PlayableEarly info={info.data} />}
      {a && (
        <div class="grid2">
          <section class="card" aria-labelledby="info-h">
            <h2 id="info-h">Playback info</h2>
            <Info asset={a} />
            <Json value={a} label="asset JSON" />
          </section>
          {ready && <ExportIpfs asset={a} onStarted={() => void asset.reload()} />}
        </div>
      )}
    </section>
  );
}
