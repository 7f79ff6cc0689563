// Where a service's CPU went, from a V8 .cpuprofile (BENCH_SERVICE_NODE_OPTIONS="--cpu-prof
// --cpu-prof-dir=DIR" on a live bench writes one per process at its exit):
//   node bench/cpu-profile.ts FILE PATTERN...
// For each PATTERN (a part of a source URL, e.g. /src/live/archive/; `a&b`: both on the stack),
// the seconds of samples with a matching frame anywhere on their stack (inclusive time), beside
// the profile's busy and idle seconds. Work a function hands to a promise continuation or to
// another module's queue (the embedded database runs its queries that way) is counted where it
// runs, not under its caller.

import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** The URLs on the stack of the sample whose leaf is `id`. */
function stackUrls(id: number, byId: Map<number, ProfileNode>, parent: Map<number, number>): string[] {
  const urls: string[] = [];
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const url = byId.get(cur)?.callFrame.url;
    if (url) urls.push(url);
  }
  return urls;
}

export function profileShares(p: CpuProfile, patterns: string[]): { busy: number; idle: number; hits: number[] } {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const out = { busy: 0, idle: 0, hits: patterns.map(() => 0) };
  p.samples.forEach((id, i) => {
    const dt = (p.timeDeltas[i + 1] ?? p.timeDeltas[i] ?? 0) / 1e6;
    if (byId.get(id)?.callFrame.functionName === '(idle)') {
      out.idle += dt;
      return;
    }
    out.busy += dt;
    const urls = stackUrls(id, byId, parent);
    patterns.forEach((pattern, k) => {
      if (pattern.split('&').every((part) => urls.some((u) => u.includes(part)))) out.hits[k] = (out.hits[k] ?? 0) + dt;
    });
  });
  return out;
}

if (import.meta.main) {
  const [file, ...patterns] = process.argv.slice(2);
  if (!file) throw new Error('usage: node bench/cpu-profile.ts FILE PATTERN...');
  const p = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const r = profileShares(p, patterns);
  console.log(
    `${file}: ${((p.endTime - p.startTime) / 1e6).toFixed(1)} s sampled, busy ${r.busy.toFixed(2)} s, idle ${r.idle.toFixed(2)} s`,
  );
  for (const [k, pattern] of patterns.entries()) console.log(`${pattern.padEnd(40)} ${(r.hits[k] ?? 0).toFixed(2)} s`);
}
