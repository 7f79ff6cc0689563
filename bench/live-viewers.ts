// Loopback LL-HLS viewers for the live benches (bench/live.ts, bench/live-cluster.ts): each
// does what hls.js in lowLatencyMode does at the live edge, without a browser.

import http from 'node:http';

export interface ViewerCounts {
  playlists: number;
  parts: number;
  errors: number;
  /**
   * The distinct URLs asked for, when the caller counts them: each part's path, and each
   * blocking playlist reload as `?_HLS_msn=M&_HLS_part=P`.
   */
  seen?: Set<string>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function get(url: string, agent: http.Agent): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('latin1') }));
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

/**
 * One LL-HLS viewer, as hls.js in lowLatencyMode: for the part its playlist hints, the part
 * itself and the playlist that contains it (_HLS_msn/_HLS_part) at once; the service holds
 * both until the part exists (RFC 8216bis 6.2.5.2, 6.2.6).
 */
export async function viewer(
  playlist: string,
  o: { agent: http.Agent; stop: AbortSignal; counts: ViewerCounts },
): Promise<void> {
  let pl = await get(playlist, o.agent).catch(() => ({ status: 0, body: '' }));
  while (!o.stop.aborted) {
    try {
      if (pl.status !== 200) throw new Error(`playlist ${pl.status}`);
      const hint = /#EXT-X-PRELOAD-HINT:TYPE=PART,URI="([^"]+)"/.exec(pl.body)?.[1];
      const at = hint ? /(\d+)\.(\d+)\.m4s/.exec(hint) : null;
      if (!hint || !at) throw new Error('no preload hint');
      const partUrl = new URL(hint, playlist);
      const [part, next] = await Promise.all([
        get(partUrl.toString(), o.agent),
        get(`${playlist}?_HLS_msn=${at[1]}&_HLS_part=${at[2]}`, o.agent),
      ]);
      if (part.status !== 200) throw new Error(`part ${part.status}`);
      o.counts.parts++;
      o.counts.playlists++;
      o.counts.seen?.add(partUrl.pathname).add(`?_HLS_msn=${at[1]}&_HLS_part=${at[2]}`);
      pl = next;
    } catch {
      o.counts.errors++;
      await sleep(250);
      pl = await get(playlist, o.agent).catch(() => ({ status: 0, body: '' }));
    }
  }
}
