import { hostProblem, withAllowHint } from '../lib/net-guard.ts';
import { pathStyleHint } from '../storage/index.ts';
import { ValidationError } from '../lib/errors.ts';
import { objectPathProblem } from '../lib/object-path.ts';
import { c2paProblems, OUTPUT_KINDS, type OutputKind, profileProblems, writtenBy } from '../transcode/index.ts';
import type { TranscodeParams } from './contract/index.ts';

// The rules of POST /api/transcode that JSON Schema cannot say well. Each message names the
// field path and the rule. Runs before anything is queued; nothing is downloaded here.

export interface TranscodeRules {
  allowPrivateUrls: boolean;
  /**
   * Checks a UCAN proof for dweb storage; throws ValidationError naming the problem, and the
   * field (`storage.credentials.proof` unless `field` says where else the proof was).
   */
  validateDwebProof?: (proof: string, field?: string) => Promise<void>;
  /** Whether this server can sign MP4s (MEDIAPLANE_C2PA_KEY/CERTS set). */
  c2paConfigured: boolean;
}

const URL_SCHEMES = ['https:', 'http:', 'ipfs:', 'ar:'];

/** An absolute URL with no user name or password, on an address `rules` allow; null when it does not parse. */
export async function checkHttpUrl(
  field: string,
  raw: string,
  rules: Pick<TranscodeRules, 'allowPrivateUrls'>,
  problems: string[],
): Promise<URL | null> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    problems.push(`${field}: must be an absolute URL`);
    return null;
  }
  if (url.username || url.password)
    problems.push(`${field}: must not carry a user name or password; pass credentials in the credentials field`);
  const problem = await hostProblem(url, { allowPrivate: rules.allowPrivateUrls });
  if (problem) problems.push(`${field}: address not allowed: ${withAllowHint(problem)}`);
  return url;
}

async function checkInput(p: TranscodeParams, rules: TranscodeRules, problems: string[]): Promise<void> {
  if ('type' in p.input) {
    const url = await checkHttpUrl('input.endpoint', p.input.endpoint, rules, problems);
    if (url && !['http:', 'https:'].includes(url.protocol))
      problems.push('input.endpoint: must start with https:// or http://');
    return;
  }
  await checkInputUrl('input.url', p.input.url, rules, problems);
}

/**
 * The rules of a URL to fetch a video from (POST /api/transcode's `input.url`, POST
 * /api/asset/upload/url's `url`), each problem reported under `field`.
 */
export async function checkInputUrl(
  field: string,
  raw: string,
  rules: Pick<TranscodeRules, 'allowPrivateUrls'>,
  problems: string[],
): Promise<void> {
  const scheme = /^[a-z][a-z0-9+.-]*:/i.exec(raw)?.[0].toLowerCase();
  if (!scheme || !URL_SCHEMES.includes(scheme)) {
    problems.push(`${field}: must start with https://, http://, ipfs:// or ar://`);
    return;
  }
  if (scheme === 'ipfs:' || scheme === 'ar:') {
    if (!/^(ipfs|ar):\/\/[A-Za-z0-9_-]+/.test(raw)) problems.push(`${field}: must be ${scheme}//<id>[/path]`);
    return;
  }
  const url = await checkHttpUrl(field, raw, rules, problems);
  // Subdomain-style gateway URLs cannot be mapped back to a CID reliably: path style only.
  const hint = url && pathStyleHint(url);
  if (hint)
    problems.push(
      `${field}: subdomain-style gateway URLs are not supported; use the path style https://GATEWAY/ipfs/CID/file (for this URL: ${hint})`,
    );
}

async function checkStorage(p: TranscodeParams, rules: TranscodeRules, problems: string[]): Promise<void> {
  // No storage: the built-in store (spec/API.md section C).
  if (!p.storage) return;
  if (p.storage.type === 's3') {
    const url = await checkHttpUrl('storage.endpoint', p.storage.endpoint, rules, problems);
    if (url && !['http:', 'https:'].includes(url.protocol))
      problems.push('storage.endpoint: must start with https:// or http://');
    return;
  }
  if (!rules.validateDwebProof) {
    problems.push(`storage.type: ${p.storage.type} is not available on this server`);
    return;
  }
  try {
    await rules.validateDwebProof(p.storage.credentials.proof);
  } catch (err) {
    if (err instanceof ValidationError) problems.push(...err.details);
    else throw err;
  }
}

/** The path rule (lib/object-path.ts) on every path a request names (issue #15). */
function checkPaths(p: TranscodeParams, problems: string[]): void {
  for (const kind of OUTPUT_KINDS) {
    const path = p.outputs[kind]?.path;
    const problem = path === undefined ? null : objectPathProblem(path, { folder: true });
    if (problem) problems.push(`outputs.${kind}.path: ${problem}`);
  }
  if ('type' in p.input) {
    const problem = objectPathProblem(p.input.path);
    if (problem) problems.push(`input.path: ${problem}`);
  }
}

// H.264 level 6.2's largest frame (139,264 macroblocks of 16x16), the most any of our
// encoders' highest levels decode; a ladder may hold two such frames' worth of pixels.
const MAX_FRAME_PIXELS = 8192 * 4352;
const MAX_LADDER_PIXELS = 2 * MAX_FRAME_PIXELS;
const FPS_RANGE = { min: 1, max: 240 };
// A keyframe interval in seconds, as Livepeer sends it ("2", "0.5"): no exponent, no sign.
const GOP_SECONDS = /^\d{1,2}(\.\d{1,3})?$/;
const GOP_MAX_SECS = 60;

type Profile = NonNullable<TranscodeParams['profiles']>[number];

/** Bounds JSON Schema cannot say alone: products, ratios and number strings (issue #15). */
function profileBoundsProblems(prof: Profile, field: string): string[] {
  const problems: string[] = [];
  const pixels = prof.width * prof.height;
  if (pixels > MAX_FRAME_PIXELS)
    problems.push(
      `${field}: width x height must be at most ${MAX_FRAME_PIXELS} pixels (8192x4352; this one is ${pixels})`,
    );
  if (prof.fps !== undefined) {
    const rate = prof.fps / (prof.fpsDen ?? 1);
    if (rate < FPS_RANGE.min || rate > FPS_RANGE.max)
      problems.push(
        `${field}.fps: the frame rate fps/fpsDen must be from ${FPS_RANGE.min} to ${FPS_RANGE.max} (this one is ${rate.toPrecision(4)})`,
      );
  }
  if (prof.gop !== undefined && prof.gop !== 'intra') {
    const secs = GOP_SECONDS.test(prof.gop) ? Number(prof.gop) : NaN;
    if (!(secs > 0 && secs <= GOP_MAX_SECS))
      problems.push(
        `${field}.gop: must be a number of seconds from 0.001 to ${GOP_MAX_SECS} written as a string, e.g. "2" or "0.5", or "intra" (every frame a keyframe)`,
      );
  }
  return problems;
}

/**
 * The ladder's rules for the outputs a job writes. `words: 'failure'` words the output
 * format's rules without naming POST /api/transcode's `outputs` field (an asset has none).
 */
export function checkProfiles(
  profiles: readonly Profile[] | undefined,
  o: { outputs: Partial<Record<OutputKind, unknown>>; words?: 'rule' | 'failure' },
  problems: string[],
): void {
  const seen = new Set<string>();
  let ladderPixels = 0;
  profiles?.forEach((prof, i) => {
    if (seen.has(prof.name)) problems.push(`profiles[${i}].name: must be unique (${prof.name} is used twice)`);
    seen.add(prof.name);
    // The name is a folder of the HLS outputs (`<hls.path>/<name>/index.m3u8`): `..` would
    // climb out of it (issue #15).
    const nameProblem = objectPathProblem(prof.name);
    if (nameProblem) problems.push(`profiles[${i}].name: ${nameProblem}`);
    // Reserved names and the encoders each output format takes: the transcode domain's rules.
    for (const x of profileProblems(prof, writtenBy(o.outputs)))
      problems.push(`profiles[${i}].${x.field}: ${x[o.words ?? 'rule']}`);
    if (prof.width % 2 !== 0 || prof.height % 2 !== 0)
      problems.push(`profiles[${i}]: width and height must be even numbers (4:2:0 chroma, every encoder)`);
    problems.push(...profileBoundsProblems(prof, `profiles[${i}]`));
    ladderPixels += prof.width * prof.height;
  });
  if (ladderPixels > MAX_LADDER_PIXELS)
    problems.push(
      `profiles: the ladder's width x height summed over all profiles must be at most ${MAX_LADDER_PIXELS} pixels (this one is ${ladderPixels})`,
    );
}

const withSlash = (path: string) => (path.startsWith('/') ? path : `/${path}`);

/** Validates what the schema cannot and returns the params to store (paths normalized). */
export async function checkTranscodeRequest(p: TranscodeParams, rules: TranscodeRules): Promise<TranscodeParams> {
  const problems: string[] = [];
  await checkInput(p, rules, problems);
  await checkStorage(p, rules, problems);
  checkPaths(p, problems);
  checkProfiles(p.profiles, { outputs: p.outputs }, problems);
  problems.push(...c2paProblems({ c2pa: p.c2pa, signing: rules.c2paConfigured, outputs: p.outputs }));
  if (problems.length > 0) throw new ValidationError(problems);
  const outputs: TranscodeParams['outputs'] = {};
  for (const kind of OUTPUT_KINDS) {
    const o = p.outputs[kind];
    if (o) outputs[kind] = { path: withSlash(o.path) };
  }
  const input = 'type' in p.input ? { ...p.input, path: withSlash(p.input.path) } : p.input;
  return { ...p, input, outputs };
}
