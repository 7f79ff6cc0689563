// A task as a person reads it: what it worked on (its input: a URL, a bucket's file, a file
// sent from a browser, or an asset), the asset it made or read by name, and its outputs as
// links with human sizes and durations. The raw params and output stay behind "Show JSON".

import type { ComponentChildren } from 'preact';
import { ValueList } from '../components/index.ts';
import { bytes, duration } from '../format.ts';
import { href } from '../router.ts';
import type { Task } from '../wire.ts';

/** Asset names by id, as far as they are known. */
export type AssetNames = ReadonlyMap<string, string>;

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | undefined =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : undefined;
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

export type TaskInput =
  | { kind: 'url'; url: string }
  | { kind: 's3'; bucket: string; path: string; endpoint?: string | undefined }
  | { kind: 'direct' }
  | { kind: 'asset'; id: string; from?: number | undefined; to?: number | undefined };

/** What the task read, from its params as the API shows them. */
export function taskInput(t: Task): TaskInput | undefined {
  const p = t.params;
  if (t.type === 'transcode-file') {
    const input = obj(obj(p['transcode-file'])?.input);
    const url = str(input?.url);
    if (url) return { kind: 'url', url };
    if (input?.type === 's3')
      return {
        kind: 's3',
        bucket: str(input.bucket) ?? '',
        path: str(input.path) ?? '',
        endpoint: str(input.endpoint),
      };
    return undefined;
  }
  if (t.type === 'upload') {
    const url = str(obj(p.upload)?.url);
    return url ? { kind: 'url', url } : { kind: 'direct' };
  }
  if (t.type === 'clip' && t.inputAssetId) {
    const s = obj(obj(p.clip)?.clipStrategy);
    return { kind: 'asset', id: t.inputAssetId, from: num(s?.startTime), to: num(s?.endTime) };
  }
  if (t.inputAssetId) return { kind: 'asset', id: t.inputAssetId };
  return undefined;
}

/** The last segment of a URL's or key's path: what a person calls the file. */
export function fileName(path: string): string {
  const clean = path.replace(/[?#].*$/s, '').replace(/\/+$/, '');
  const last = clean.slice(clean.lastIndexOf('/') + 1);
  try {
    return decodeURIComponent(last) || clean;
  } catch {
    return last || clean;
  }
}

/** What a person calls the task: its asset's name, else its input's file name. */
export function taskTitle(t: Task, names: AssetNames): string | undefined {
  const asset = t.outputAssetId ?? (t.type === 'export' ? t.inputAssetId : undefined);
  const named = asset ? names.get(asset) : undefined;
  if (named) return named;
  const input = taskInput(t);
  if (input?.kind === 'url') return fileName(input.url);
  if (input?.kind === 's3') return fileName(input.path);
  if (input?.kind === 'asset') return names.get(input.id);
  return undefined;
}

function AssetLink({ id, names }: { id: string; names: AssetNames }) {
  return <a href={href('assets', id)}>{names.get(id) ?? `asset ${id}`}</a>;
}

/** The task's input in words, with a link where there is one. */
export function InputText({ task, names }: { task: Task; names: AssetNames }) {
  const input = taskInput(task);
  const video = obj(obj(task.output?.transcodeFile)?.input_video);
  const facts = video ? ` (${[duration(num(video.duration)), bytes(num(video.size))].filter(Boolean).join(', ')})` : '';
  if (!input) return <span class="hint">not shown</span>;
  if (input.kind === 'url')
    return (
      <>
        <a href={input.url} rel="noreferrer" target="_blank">
          {fileName(input.url)}
        </a>
        {facts} <span class="hint wrap">{input.url}</span>
      </>
    );
  if (input.kind === 's3')
    return (
      <>
        <code>
          s3://{input.bucket}
          {input.path.startsWith('/') ? '' : '/'}
          {input.path}
        </code>
        {facts}
        {input.endpoint && <span class="hint"> at {input.endpoint}</span>}
      </>
    );
  if (input.kind === 'direct') return <>a file sent to the upload URL</>;
  const range =
    input.from !== undefined && input.to !== undefined
      ? ` from ${duration(input.from / 1000)} to ${duration(input.to / 1000)}`
      : '';
  return (
    <>
      <AssetLink id={input.id} names={names} />
      {range}
    </>
  );
}

interface Rendition {
  name?: string;
  width?: number;
  height?: number;
  bitrate?: number;
  size?: number;
  url?: string;
  path?: string;
}

export const kHz = (hz: number | undefined) => (hz === undefined ? '' : `${hz / 1000} kHz`);
const mbps = (b: number | undefined) => (b === undefined ? '' : `${(b / 1e6).toFixed(b < 1e6 ? 2 : 1)} Mbps`);

function renditionLine(r: Rendition): string {
  const picture = r.width && r.height ? `${r.width}×${r.height}` : '';
  return [r.name, picture, mbps(r.bitrate), bytes(r.size)].filter(Boolean).join(' · ');
}

function Link({
  url,
  path,
  children,
}: {
  url?: string | undefined;
  path?: string | undefined;
  children: ComponentChildren;
}) {
  if (url)
    return (
      <a href={url} rel="noreferrer" target="_blank">
        {children}
      </a>
    );
  return (
    <>
      {children} {path && <code>{path}</code>}
    </>
  );
}

function renditionsOf(v: unknown): Rendition[] {
  return Array.isArray(v) ? v.map((r) => (obj(r) ?? {}) as Rendition) : [];
}

/** One HLS or fMP4 tree: its master playlist and each rendition. */
function Tree({ label, tree }: { label: string; tree: Obj }) {
  const items = [...renditionsOf(tree.renditions), ...renditionsOf(tree.audio)];
  // The manifest has a path only; its URL is the playlist's with that path in place of the playlist's.
  const dash = str(tree.dash);
  const url = str(tree.url);
  const path = str(tree.path);
  const dashUrl = dash && url && path && url.endsWith(path) ? url.slice(0, -path.length) + dash : undefined;
  return (
    <li>
      <Link url={str(tree.url)} path={str(tree.path)}>
        {label}
      </Link>
      {dash && (
        <>
          {' · '}
          <Link url={dashUrl} path={dashUrl ? undefined : dash}>
            DASH manifest
          </Link>
        </>
      )}
      {items.length > 0 && (
        <ul>
          {items.map((r) => (
            <li key={r.path ?? r.name}>
              <Link url={r.url} path={r.url ? undefined : r.path}>
                {renditionLine(r)}
              </Link>
            </li>
          ))}
        </ul>
      )}
    </li>
  );
}

/** A transcode's outputs: HLS, fMP4/DASH, MP4 files and the thumbnails, with links and sizes. */
function TranscodeOutputs({ out }: { out: Obj }) {
  const hls = obj(out.hls);
  const fmp4 = obj(out.fmp4);
  const thumbs = obj(out.thumbnails);
  const total = [...renditionsOf(hls?.renditions), ...renditionsOf(out.mp4), ...renditionsOf(fmp4?.renditions)].reduce(
    (n, r) => n + (r.size ?? 0),
    0,
  );
  return (
    <>
      <ul class="outputs">
        {hls && <Tree label="HLS (TS segments): master playlist" tree={hls} />}
        {fmp4 && <Tree label="fMP4 (CMAF): master playlist" tree={fmp4} />}
        {renditionsOf(out.mp4).map((r) => (
          <li key={r.path ?? r.name}>
            MP4:{' '}
            <Link url={r.url} path={r.url ? undefined : r.path}>
              {renditionLine(r)}
            </Link>
          </li>
        ))}
        {thumbs && (
          <li>
            <Link url={str(thumbs.url)} path={str(thumbs.path)}>
              Storyboard (WebVTT)
            </Link>
            {' · '}
            <Link url={str(thumbs.posterUrl)} path={str(thumbs.poster)}>
              Poster (JPEG)
            </Link>
          </li>
        )}
        {str(out.baseUrl) && (
          <li>
            On IPFS: <code>{str(out.baseUrl)}</code>
          </li>
        )}
      </ul>
      {total > 0 && <p class="hint">{bytes(total)} of renditions in all.</p>}
    </>
  );
}

/** What an upload or clip gave its asset: the source's size, length and tracks, and where it plays. */
function AssetOutputs({ out, task, names }: { out: Obj; task: Task; names: AssetNames }) {
  const spec = obj(out.videoSpec);
  const tracks = Array.isArray(spec?.tracks) ? spec.tracks.map((x) => obj(x) ?? {}) : [];
  return (
    <ul class="outputs">
      {task.outputAssetId && (
        <li>
          Asset: <AssetLink id={task.outputAssetId} names={names} />
        </li>
      )}
      <li>
        Source:{' '}
        {[duration(num(spec?.duration)), bytes(num(out.size)), mbps(num(spec?.bitrate))].filter(Boolean).join(' · ')}
      </li>
      {tracks.map((t, i) => (
        <li key={i}>
          {t.type === 'video'
            ? `Video: ${str(t.codec) ?? ''} ${num(t.width) ?? '?'}×${num(t.height) ?? '?'}${num(t.fps) ? ` ${num(t.fps)} fps` : ''}`
            : `Audio: ${str(t.codec) ?? ''}${num(t.channels) ? ` ${num(t.channels)} ch` : ''}${num(t.sampleRate) ? ` ${kHz(num(t.sampleRate))}` : ''}`}
        </li>
      ))}
      {str(out.playbackUrl) && (
        <li>
          <Link url={str(out.playbackUrl)}>HLS playlist</Link>
        </li>
      )}
    </ul>
  );
}

/** An export's result: the CIDs and gateway links. */
function ExportOutputs({ out }: { out: Obj }) {
  const ipfs = obj(out.ipfs);
  if (!ipfs) return <p class="hint">Sent; nothing to link.</p>;
  const cid = str(ipfs.videoFileCid) ?? str(ipfs.cid);
  const gateway = str(ipfs.videoFileGatewayUrl) ?? str(ipfs.gatewayUrl);
  return (
    <ul class="outputs">
      <li>
        CID <code>{cid}</code> {gateway && <Link url={gateway}>open on the gateway</Link>}
      </li>
      {str(ipfs.nftMetadataCid) && (
        <li>
          NFT metadata <code>{str(ipfs.nftMetadataCid)}</code>{' '}
          {str(ipfs.nftMetadataGatewayUrl) && <Link url={str(ipfs.nftMetadataGatewayUrl)}>open</Link>}
        </li>
      )}
    </ul>
  );
}

/** The task's outputs as a person reads them; an unknown shape as a list. */
export function TaskOutputs({ task, names }: { task: Task; names: AssetNames }) {
  const o = task.output ?? {};
  const transcode = obj(o.transcodeFile);
  if (transcode) return <TranscodeOutputs out={transcode} />;
  const made = obj(o.upload) ?? obj(o.clip);
  if (made) return <AssetOutputs out={made} task={task} names={names} />;
  const exported = obj(o.export) ?? obj(o.exportData);
  if (exported) return <ExportOutputs out={exported} />;
  return <ValueList value={o} />;
}

/** The params without what another key repeats: a transcode's `outputs` is also under `transcode-file`. */
export function paramsShown(t: Task): Record<string, unknown> {
  const { outputs: _same, ...rest } = t.params;
  return obj(t.params['transcode-file']) ? rest : t.params;
}
