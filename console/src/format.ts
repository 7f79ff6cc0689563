// How numbers read to a person: sizes, durations, times.

export function bytes(n: number | undefined): string {
  if (n === undefined) return '';
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let v = n;
  let i = 0;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

/** 75.4 -> "1:15", 3725 -> "1:02:05". */
export function duration(seconds: number | undefined): string {
  if (seconds === undefined || !Number.isFinite(seconds)) return '';
  const s = Math.floor(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, '0');
  return h ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`;
}

export function dateTime(ms: number | undefined): string {
  return ms === undefined ? '' : new Date(ms).toLocaleString();
}

/** A rate in bytes per second as bits, the way bitrates are read: 152000 -> "1.2 Mb/s". */
export function bitRate(bytesPerSecond: number | undefined): string {
  if (bytesPerSecond === undefined) return '';
  const bits = bytesPerSecond * 8;
  if (bits >= 1e6) return `${(bits / 1e6).toFixed(1)} Mb/s`;
  if (bits >= 1e3) return `${Math.round(bits / 1e3)} kb/s`;
  return `${Math.round(bits)} b/s`;
}
