import { useId, useRef, useState } from 'preact/hooks';
import { Upload } from 'tus-js-client';
import { api, errorWords } from '../api.ts';
import { Button, describedBy, ErrorText, Field, Progress } from '../components/index.ts';
import { bytes } from '../format.ts';
import { FollowedAsset } from '../widgets/FollowedAsset.tsx';
import type { Asset } from '../wire.ts';
import { type AssetOptions, DEFAULT_OPTIONS, OptionsFields, optionsBody } from './upload-options.tsx';

// Upload page: files by drag and drop or the file input, each through POST
// /api/asset/request-upload and then tus (resumable, a progress bar each); or a URL through
// POST /api/asset/upload/url. Each new asset is then followed to ready (widgets/FollowedAsset.tsx):
// waiting, processing with the server's progress, ready with a link to play it.

interface Created {
  asset: Asset;
  tusEndpoint?: string;
}

interface Item {
  key: number;
  file: File;
  state: 'starting' | 'uploading' | 'paused' | 'done' | 'failed';
  progress: number;
  error?: unknown;
  assetId?: string;
  upload?: Upload;
}

/** The API's words in a tus failure: the answer's JSON error, else tus-js-client's message. */
function tusError(err: Error): Error {
  const res = (err as { originalResponse?: { getBody(): string; getStatus(): number } | null }).originalResponse;
  if (!res) return err;
  try {
    const words = errorWords(JSON.parse(res.getBody()));
    if (words.length) return new Error(words.join('; '));
  } catch {}
  return new Error(`the upload failed: HTTP ${res.getStatus()}`);
}

function useUploads(options: AssetOptions) {
  const [items, setItems] = useState<Item[]>([]);
  const next = useRef(0);
  const update = (key: number, patch: Partial<Item>) =>
    setItems((list) => list.map((i) => (i.key === key ? { ...i, ...patch } : i)));

  const start = async (file: File, key: number) => {
    let created: Created;
    try {
      created = await api<Created>('POST', '/api/asset/request-upload', { name: file.name, ...optionsBody(options) });
    } catch (e) {
      update(key, { state: 'failed', error: e });
      return;
    }
    const upload = new Upload(file, {
      endpoint: created.tusEndpoint ?? '',
      metadata: { filename: file.name, filetype: file.type },
      chunkSize: 8 * 1024 * 1024,
      retryDelays: [0, 1000, 3000, 5000],
      removeFingerprintOnSuccess: true,
      onProgress: (sent, total) => update(key, { progress: total ? sent / total : 0 }),
      onSuccess: () => update(key, { state: 'done', progress: 1 }),
      onError: (err) => update(key, { state: 'failed', error: tusError(err) }),
    });
    update(key, { state: 'uploading', assetId: created.asset.id, upload });
    upload.start();
  };

  const add = (files: File[]) => {
    const added = files.map((file) => ({ key: next.current++, file, state: 'starting' as const, progress: 0 }));
    setItems((list) => [...added, ...list]);
    for (const item of added) void start(item.file, item.key);
  };
  const pause = (i: Item) => {
    void i.upload?.abort();
    update(i.key, { state: 'paused' });
  };
  const resume = (i: Item) => {
    if (!i.upload) {
      update(i.key, { state: 'starting', error: undefined });
      void start(i.file, i.key);
      return;
    }
    update(i.key, { state: 'uploading', error: undefined });
    i.upload.start();
  };
  return { items, add, pause, resume };
}

function UploadRow({ item, onPause, onResume }: { item: Item; onPause(): void; onResume(): void }) {
  const label = `${item.file.name}: upload progress`;
  return (
    <li>
      <div class="row">
        <span class="upload-name">{item.file.name}</span>
        <span class="hint">{bytes(item.file.size)}</span>
      </div>
      {item.state === 'done' && item.assetId ? (
        <>
          <p class="hint">Uploaded {bytes(item.file.size)}.</p>
          <FollowedAsset id={item.assetId} />
        </>
      ) : (
        <>
          <Progress value={item.state === 'starting' ? undefined : item.progress} label={label} />
          <div class="row" role="status">
            {item.state === 'starting' && <span>Starting the upload…</span>}
            {item.state === 'uploading' && <span>Uploading: {bytes(item.file.size * item.progress)} sent</span>}
            {item.state === 'paused' && <span>Paused.</span>}
            {item.state === 'uploading' && (
              <Button onClick={onPause} aria-label={`Pause ${item.file.name}`}>
                Pause
              </Button>
            )}
            {(item.state === 'paused' || item.state === 'failed') && (
              <Button onClick={onResume} aria-label={`Resume ${item.file.name}`}>
                Resume
              </Button>
            )}
          </div>
        </>
      )}
      <ErrorText error={item.error} />
    </li>
  );
}

function Files({ options }: { options: AssetOptions }) {
  const input = useId();
  const [over, setOver] = useState(false);
  const { items, add, pause, resume } = useUploads(options);
  const onDrop = (e: DragEvent) => {
    e.preventDefault();
    setOver(false);
    add([...(e.dataTransfer?.files ?? [])]);
  };
  return (
    <section class="card" aria-labelledby={`${input}-h`}>
      <h2 id={`${input}-h`}>Files</h2>
      {/* biome-ignore lint/a11y/noStaticElementInteractions: dropping is a pointer shortcut; the file input beside it is the keyboard way */}
      <div
        class={`dropzone${over ? ' over' : ''}`}
        onDragOver={(e) => {
          e.preventDefault();
          setOver(true);
        }}
        onDragLeave={() => setOver(false)}
        onDrop={onDrop}
      >
        <p>Drop video files here, or</p>
        <input
          id={input}
          class="visually-hidden"
          type="file"
          multiple
          accept="video/*,audio/*,.mkv,.mov,.mp4,.webm,.ts"
          onChange={(e) => {
            add([...(e.currentTarget.files ?? [])]);
            e.currentTarget.value = '';
          }}
        />
        <label for={input} class="btn btn-primary">
          Choose files
        </label>
        <p class="hint">Uploads resume after a dropped connection (tus).</p>
      </div>
      {items.length > 0 && (
        <ul class="uploads" aria-label="Uploads">
          {items.map((i) => (
            <UploadRow key={i.key} item={i} onPause={() => pause(i)} onResume={() => resume(i)} />
          ))}
        </ul>
      )}
    </section>
  );
}

function FromUrl({ options }: { options: AssetOptions }) {
  const urlId = useId();
  const nameId = useId();
  const [url, setUrl] = useState('');
  const [name, setName] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [created, setCreated] = useState<Created['asset'][]>([]);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const fallback = url.split('?')[0]?.split('/').filter(Boolean).pop() ?? 'video';
      const res = await api<Created>('POST', '/api/asset/upload/url', {
        name: name.trim() || decodeURIComponent(fallback),
        url: url.trim(),
        ...optionsBody(options),
      });
      setCreated((c) => [res.asset, ...c]);
      setUrl('');
      setName('');
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card" onSubmit={submit} aria-labelledby={`${urlId}-h`}>
      <h2 id={`${urlId}-h`}>Import from a URL</h2>
      <Field id={urlId} label="Video URL" error={error} hint="https, http, ipfs:// or ar://">
        <input
          id={urlId}
          type="text"
          inputMode="url"
          required
          value={url}
          onInput={(e) => setUrl(e.currentTarget.value)}
          aria-invalid={error ? true : undefined}
          aria-describedby={describedBy(urlId, { error, hint: true })}
        />
      </Field>
      <Field id={nameId} label="Name (optional)">
        <input id={nameId} type="text" value={name} onInput={(e) => setName(e.currentTarget.value)} />
      </Field>
      <Button type="submit" variant="primary" busy={busy}>
        Import
      </Button>
      {created.length > 0 && (
        <ul class="uploads" aria-label="Imported">
          {created.map((a) => (
            <li key={a.id}>
              <FollowedAsset id={a.id} first={a} named />
            </li>
          ))}
        </ul>
      )}
    </form>
  );
}

export function UploadPage() {
  const [options, setOptions] = useState<AssetOptions>(DEFAULT_OPTIONS);
  return (
    <section>
      <h1>Upload</h1>
      <OptionsFields value={options} onChange={setOptions} />
      <Files options={options} />
      <FromUrl options={options} />
    </section>
  );
}
