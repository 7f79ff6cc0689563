import { RejectReason } from './handshake.ts';

// What a publisher's SRT stream id names. Livepeer's form is the bare stream key
// (`srt://HOST:PORT?streamid=KEY`); OBS and others write SRT's access-control form
// (libsrt docs/features/access-control.md): `#!::` then comma-separated `key=value` pairs, the
// resource in `r` and the mode in `m` (`request` reads, `publish` sends). This ingest only
// takes publishers, so a caller that asks to read is refused; one that names no mode is
// taken for a publisher (it is connecting to an ingest).

/** A stream id that names a key to publish to, or why it cannot be taken. */
export type PublishTarget = { streamKey: string } | { refused: number; why: string };

const ACCESS_CONTROL = '#!::';

/** The stream key a publisher's stream id names (a secret: `why` never quotes it). */
export function publishTarget(streamId: string | undefined): PublishTarget {
  if (streamId === undefined || streamId === '')
    return { refused: RejectReason.badRequest, why: 'no stream id: connect with ?streamid=STREAM_KEY' };
  const form = accessControlForm(streamId);
  if (form === undefined) return { streamKey: streamId };
  const pairs = new Map<string, string>();
  for (const item of form.split(',')) {
    const eq = item.indexOf('=');
    if (eq <= 0)
      return { refused: RejectReason.badRequest, why: 'a malformed access-control stream id (#!::key=value,...)' };
    pairs.set(item.slice(0, eq), item.slice(eq + 1));
  }
  const mode = pairs.get('m') ?? 'publish';
  if (mode !== 'publish')
    return {
      refused: RejectReason.badMode,
      why: 'a mode other than m=publish: this is an ingest, it only takes publishers',
    };
  const resource = pairs.get('r');
  if (!resource) return { refused: RejectReason.badRequest, why: 'an access-control stream id without r=STREAM_KEY' };
  return { streamKey: resource };
}

/**
 * The `key=value` list of an access-control stream id; undefined for a bare key. ffmpeg 5.1
 * sends a URL's `streamid` as written, so `?streamid=%23!%3A%3Ar%3DKEY...` (the form a URL
 * needs, `#` starting its fragment) arrives percent-encoded: it is read decoded.
 */
function accessControlForm(streamId: string): string | undefined {
  if (streamId.startsWith(ACCESS_CONTROL)) return streamId.slice(ACCESS_CONTROL.length);
  if (!/^%23!%3a%3a/i.test(streamId)) return undefined;
  try {
    return decodeURIComponent(streamId).slice(ACCESS_CONTROL.length);
  } catch {
    return undefined;
  }
}
