import { NotFoundError, ValidationError } from '../lib/errors.ts';
import { hostProblem, withAllowHint } from '../lib/net-guard.ts';
import { DEFAULT_LIVE_PROFILES, type MultistreamTarget, type Profile, SOURCE_RENDITION } from '../live/index.ts';
import { type MultistreamTargetStore, targetUrlProblem } from '../live/index.ts';
import { defaultTargetName } from './contract/multistream.ts';
import type { TranscodeRules } from './validate-transcode.ts';

// The restream targets a stream names, as the stream routes (create, PATCH) and the
// create-multistream-target route take them: the rendition each names, its url's checks, and
// inline specs saved as targets so that a url lives in one table (multistream_targets).

/** The renditions a target may name: the ladder's and the source's. */
function renditionNames(profiles: readonly Profile[] | null): Set<string> {
  return new Set([SOURCE_RENDITION, ...(profiles ?? DEFAULT_LIVE_PROFILES).map((p) => p.name)]);
}

/** What is wrong with each target against the ladder the stream will have; `at` names the i-th in messages. */
export function targetProblems(
  targets: readonly MultistreamTarget[],
  profiles: readonly Profile[] | null,
  at: (i: number) => string = (i) => `multistream.targets[${i}]`,
): string[] {
  const names = renditionNames(profiles);
  const rungs = [...names].slice(1);
  return targets.flatMap((t, i) => {
    const problems: string[] = [];
    if (t.id === undefined && t.spec === undefined) problems.push(`${at(i)}: must have an id or a spec`);
    if (!names.has(t.profile))
      problems.push(
        rungs.length === 0
          ? `${at(i)}.profile: must be "source" (the stream has no profiles)`
          : `${at(i)}.profile: must be "source" or a profile of the stream (${rungs.join(', ')})`,
      );
    return problems;
  });
}

export type TargetSaver = Pick<MultistreamTargetStore, 'create' | 'owned'>;

/** The problems of a target's url under `field`: its scheme and form, then the address guard. Never quotes the url. */
export async function targetUrlProblems(
  field: string,
  url: string,
  rules: Pick<TranscodeRules, 'allowPrivateUrls'>,
): Promise<string[]> {
  const problem = targetUrlProblem(url);
  if (problem !== undefined) return [`${field}: ${problem}`];
  const refused = await hostProblem(new URL(url), { allowPrivate: rules.allowPrivateUrls });
  return refused === null ? [] : [`${field}: address not allowed: ${withAllowHint(refused)}`];
}

/**
 * A stream's targets as it keeps them: each inline spec saved as a target of the owner (its url
 * checked first), so the url lives in one table; each id must be the owner's target. An unknown
 * id is a 422 naming its field, or a 404 (`notFound`) where the route names one target.
 */
export async function keptTargets(
  given: readonly MultistreamTarget[],
  o: {
    owner: string;
    projectId: string;
    targets: TargetSaver;
    rules: Pick<TranscodeRules, 'allowPrivateUrls'>;
    field: (i: number) => string;
    unknownIdIsNotFound?: boolean;
  },
): Promise<MultistreamTarget[]> {
  const owned = await o.targets.owned(
    o.owner,
    given.flatMap((t) => (t.id === undefined ? [] : [t.id])),
  );
  const problems: string[] = [];
  for (const [i, t] of given.entries()) {
    if (t.spec) problems.push(...(await targetUrlProblems(`${o.field(i)}.spec.url`, t.spec.url, o.rules)));
    else if (t.id !== undefined && !owned.has(t.id)) {
      if (o.unknownIdIsNotFound) throw new NotFoundError('no multistream target of yours has this id');
      problems.push(`${o.field(i)}.id: no multistream target of yours has this id`);
    }
  }
  if (problems.length > 0) throw new ValidationError(problems);
  const kept: MultistreamTarget[] = [];
  for (const t of given) {
    const id = t.spec
      ? (await o.targets.create({ owner: o.owner, projectId: o.projectId, ...namedSpec(t.spec) })).id
      : (t.id as string);
    kept.push({ id, profile: t.profile, videoOnly: t.videoOnly ?? false });
  }
  return kept;
}

export function namedSpec(spec: { name?: string | undefined; url: string }): { name: string; url: string } {
  return { name: spec.name ?? defaultTargetName(spec.url), url: spec.url };
}
