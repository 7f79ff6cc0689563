// What the streams list and one stream's page both show: the live/idle badge and the health
// in words.

import type { Stream } from '../wire.ts';

/** Live (green), suspended (red: no publish is let in) or idle (muted). */
export function StreamBadge({ stream }: { stream: Stream }) {
  if (stream.suspended) return <span class="badge badge-failed">suspended</span>;
  if (stream.isActive) return <span class="badge badge-ready">live</span>;
  return <span class="badge badge-stopped">idle</span>;
}

/** The health of a live stream in words; an idle stream has none to speak of. */
export function healthWords(stream: Stream): string {
  if (!stream.isActive) return '–';
  if (stream.isHealthy === true) return 'healthy';
  if (stream.isHealthy === false) return 'unhealthy';
  return 'not known yet';
}
