// Where to publish a stream: the RTMP server URL and the stream key (OBS asks for them apart),
// the SRT URL (Livepeer's `srt://HOST:PORT?streamid=KEY`), and how to go live from OBS and
// from ffmpeg. The key is a secret: it stays hidden until its owner asks to see it (a screen
// shared while streaming would give it away), and copying it does not show it.

import { useState } from 'preact/hooks';
import { Button, CopyButton } from '../components/index.ts';
import type { Stream } from '../wire.ts';

const HIDDEN = '••••••••••••••••';

/** The RTMP server without the key (OBS's "Server"): rtmpIngestUrl with any trailing /KEY cut. */
export function rtmpServer(s: Stream): string | undefined {
  const url = s.rtmpIngestUrl?.replace(/\/+$/, '');
  if (!url) return undefined;
  const key = s.streamKey;
  return key && url.endsWith(`/${key}`) ? url.slice(0, -key.length - 1) : url;
}

/** The SRT URL a publisher uses: srtIngestUrl with `streamid=KEY`, unless it carries its own. */
export function srtUrl(s: Stream): string | undefined {
  const url = s.srtIngestUrl;
  if (!url || !s.streamKey) return undefined;
  if (/[?&]streamid=/.test(url)) return url;
  return `${url}${url.includes('?') ? '&' : '?'}streamid=${encodeURIComponent(s.streamKey)}`;
}

/** A value shown only when asked, copyable either way. */
function Secret({ label, value }: { label: string; value: string }) {
  const [shown, setShown] = useState(false);
  return (
    <>
      <code class="secret">
        {shown ? value : HIDDEN}
        {!shown && <span class="visually-hidden"> (hidden)</span>}
      </code>
      <div class="row">
        <Button onClick={() => setShown(!shown)}>{shown ? `Hide ${label}` : `Show ${label}`}</Button>
        <CopyButton text={value} label={`Copy ${label}`} />
      </div>
    </>
  );
}

function Urls({ stream }: { stream: Stream }) {
  const rtmp = rtmpServer(stream);
  const srt = srtUrl(stream);
  return (
    <dl class="props ingest">
      <dt>RTMP server</dt>
      <dd>
        {rtmp ? (
          <>
            <code>{rtmp}</code>
            <div class="row">
              <CopyButton text={rtmp} label="Copy RTMP server" />
            </div>
          </>
        ) : (
          <span class="hint">RTMP ingest is off on this server.</span>
        )}
      </dd>
      <dt>Stream key</dt>
      <dd>{stream.streamKey && <Secret label="stream key" value={stream.streamKey} />}</dd>
      <dt>SRT URL</dt>
      <dd>
        {srt ? <Secret label="SRT URL" value={srt} /> : <span class="hint">SRT ingest is off on this server.</span>}
      </dd>
    </dl>
  );
}

/** An ffmpeg command that publishes a file as a live source, the key left to the shell. */
function ffmpegCommand(stream: Stream): string | undefined {
  const rtmp = rtmpServer(stream);
  // x264 with a keyframe every 2 s at 30 fps: the source can then be passed through as a rung.
  const encode = '-c:v libx264 -preset veryfast -tune zerolatency -g 60 -c:a aac -b:a 128k';
  if (rtmp) return `ffmpeg -re -i input.mp4 ${encode} -f flv "${rtmp}/$STREAM_KEY"`;
  // The SRT URL carries the key: the command takes its address only.
  const srt = stream.srtIngestUrl?.split('?')[0];
  if (srt) return `ffmpeg -re -i input.mp4 ${encode} -f mpegts "${srt}?streamid=$STREAM_KEY"`;
  return undefined;
}

function HowTo({ stream }: { stream: Stream }) {
  const command = ffmpegCommand(stream);
  return (
    <div class="howto">
      <h3>From OBS</h3>
      <ol>
        <li>
          Settings › Stream: Service <strong>Custom…</strong>, Server: the RTMP server above, Stream Key: the stream
          key.
        </li>
        <li>
          Settings › Output (Output Mode: Advanced): Keyframe Interval <strong>1 s or 2 s</strong>. Longer, and the
          source cannot be passed through as a rendition.
        </li>
        <li>Start Streaming: this page shows the stream live within seconds.</li>
      </ol>
      <h3>From ffmpeg</h3>
      {command ? (
        <>
          <p>With the stream key in STREAM_KEY:</p>
          <pre class="snippet">{command}</pre>
          <CopyButton text={command} label="Copy command" />
        </>
      ) : (
        <p class="hint">This server takes no live ingest.</p>
      )}
      <p class="hint">
        More, with RTMPS behind a TLS proxy: <code>docs/live.md</code> in the service's folder.
      </p>
    </div>
  );
}

/** How to publish to a stream: its URLs and key, then OBS's and ffmpeg's ways. */
export function StreamIngest({ stream }: { stream: Stream }) {
  return (
    <section class="card" aria-labelledby="ingest-h">
      <h2 id="ingest-h">Go live</h2>
      <Urls stream={stream} />
      <HowTo stream={stream} />
    </section>
  );
}
