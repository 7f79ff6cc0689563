import { withUriQuery } from '../llhls/index.ts';
import type { LiveLadder, ServedRendition } from '../types.ts';
import type { Upstream, UpstreamAnswer } from './upstream.ts';

// A ladder live on another node, served through that node's internal routes: the same names
// as /media/live/ (the playlists' URIs are relative, so they resolve on the viewer's node).
// The holder writes its playlists without a query; the viewer's token (?jwt=), checked on the
// viewer's node, is added to their URIs here, so every viewer shares one upstream request.

/** Where a node answers other nodes from its own ladders: {prefix}/{playbackId}/... */
export const INTERNAL_LIVE_PREFIX = '/internal/live';

/** Where the holder at `holderUrl` answers for `playbackId`. */
export const internalBase = (holderUrl: string, playbackId: string): string =>
  `${holderUrl.replace(/\/+$/, '')}${INTERNAL_LIVE_PREFIX}/${encodeURIComponent(playbackId)}`;

type PlaylistAnswer = Awaited<ReturnType<ServedRendition['playlist']>>;

export class RemoteLadder implements LiveLadder {
  readonly #base: string;
  readonly #upstream: Upstream;

  constructor(o: { holderUrl: string; playbackId: string; upstream: Upstream }) {
    this.#base = internalBase(o.holderUrl, o.playbackId);
    this.#upstream = o.upstream;
  }

  /** The holder's multivariant playlist (it waits for every rendition's first part); undefined when it did not come. */
  async multivariant(uriQuery?: string): Promise<string | undefined> {
    const answer = await this.#upstream.get(`${this.#base}/index.m3u8`, { immutable: false });
    return answer.status === 200 ? withUriQuery(answer.body.toString('utf8'), uriQuery) : undefined;
  }

  rendition(name: string): ServedRendition {
    return new RemoteRendition(`${this.#base}/${encodeURIComponent(name)}`, name, this.#upstream);
  }

  /** Unknown here until the multivariant playlist is read: the holder waits for them itself. */
  renditions(): readonly ServedRendition[] {
    return [];
  }
}

class RemoteRendition implements ServedRendition {
  readonly name: string;
  /** The holder knows; a playlist request there waits for the first part. */
  readonly ready = true;
  readonly #base: string;
  readonly #upstream: Upstream;

  constructor(base: string, name: string, upstream: Upstream) {
    this.#base = base;
    this.name = name;
    this.#upstream = upstream;
  }

  async playlist(req: Parameters<ServedRendition['playlist']>[0]): Promise<PlaylistAnswer> {
    const query = new URLSearchParams();
    if (req.msn !== undefined) query.set('_HLS_msn', String(req.msn));
    if (req.part !== undefined) query.set('_HLS_part', String(req.part));
    const q = query.size > 0 ? `?${query}` : '';
    const answer = await this.#upstream.get(`${this.#base}/index.m3u8${q}`, { immutable: false, signal: req.signal });
    if (answer.status === 200) return { status: 200, body: withUriQuery(answer.body.toString('utf8'), req.uriQuery) };
    return refusalOf(answer);
  }

  /** Every file name is immutable: a name is never reused (llhls/names.ts). */
  async file(name: string, signal?: AbortSignal): Promise<Buffer | undefined> {
    const answer = await this.#upstream.get(`${this.#base}/${encodeURIComponent(name)}`, { immutable: true, signal });
    return answer.status === 200 ? answer.body : undefined;
  }
}

/** The holder's 400 and 404 as they are; anything else (it did not answer, or refused us) is a 503 to retry. */
function refusalOf(answer: UpstreamAnswer): PlaylistAnswer {
  const reason = answer.reason ?? `the node holding this stream answered ${answer.status}`;
  if (answer.status === 400 || answer.status === 404) return { status: answer.status, reason };
  return { status: 503, reason };
}
