// "Clip the last 30 s" while the stream is live: POST /api/clip with the stream's playbackId
// and the last 30 s by the wall clock (Unix ms, Livepeer's meaning for a live stream). The
// clip is an asset made like any other: a link to it for each clip made on this page.

import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { Button, ErrorText } from '../components/index.ts';
import { useAction } from '../hooks.ts';
import { href } from '../router.ts';
import type { Asset, Stream } from '../wire.ts';

const CLIP_MS = 30_000;

export function StreamClip({ stream }: { stream: Stream }) {
  const [made, setMade] = useState<Asset[]>([]);
  const { busy, error, run } = useAction(async () => {
    const endTime = Date.now();
    const body = { playbackId: stream.playbackId, startTime: endTime - CLIP_MS, endTime };
    const res = await api<{ asset: Asset }>('POST', '/api/clip', body);
    setMade((m) => [res.asset, ...m]);
  });
  if (!stream.isActive && made.length === 0) return null;
  return (
    <section class="card" aria-labelledby="clip-h">
      <h2 id="clip-h">Clip</h2>
      {stream.isActive && (
        <Button busy={busy} onClick={run}>
          Clip the last 30 s
        </Button>
      )}
      <ErrorText error={error} />
      {made.length > 0 && (
        <ul aria-label="Clips made">
          {made.map((a) => (
            <li key={a.id}>
              <a href={href('assets', a.id)}>{a.name}</a> <span class="hint">(an asset: ready once processed)</span>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
