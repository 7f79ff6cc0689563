import type { FastifyRequest } from 'fastify';
import { type SigningKeyStore, verifyPlaybackJwt } from '../access/index.ts';
import type { AssetStore } from '../assets/index.ts';
import { AuthError } from '../lib/errors.ts';
import { allowedOriginsOf, checkOrigin } from './media-cors.ts';
import type { MediaGrant } from './media-routes.ts';

// Who may read a /media key (issue #28, spec/API.md section C): the `authorize` hook of
// media-routes.ts. Only two kinds of key are served. Files under `asset/<playbackId>/` follow
// their asset's playback policy: `public` (or none) for anyone; `jwt` for a request with a
// valid JWT for that asset, signed by one of its owner's signing keys, as `?jwt=` or the
// `Livepeer-Jwt` header (Livepeer's two ways); 401 otherwise, saying why. Its `allowedOrigins`
// hold for both (media-cors.ts). The asset and the key are read on every request (two indexed
// lookups), so a policy change, a disabled or a deleted key holds at once. Outputs of POST
// /api/transcode without storage (`task/<taskId>/`) are public: the task answers their URLs
// to its owner, as Livepeer's transcode API does. Every other key of the built-in store is the
// service's own and answered as missing: a split task's copy of its input and its pieces'
// outputs (`pieces/<taskId>/`, which a task id must not open: the input may have been a signed
// URL), and whatever a later feature keeps there. Workers read those through the store itself.

export interface MediaAccessDeps {
  assets: Pick<AssetStore, 'byPlaybackId'>;
  signingKeys: Pick<SigningKeyStore, 'byPublicKey' | 'markSeen'>;
  /** MEDIAPLANE_JWT_MAX_LIFETIME_SECS: the longest a playback JWT may be valid for. */
  jwtMaxLifetimeSecs?: number | undefined;
}

const ASSET_KEY = /^asset\/([^/]+)(?:\/|$)/;
/** transcode/destination.ts builtinOutputPrefix: a transcode's outputs in the built-in store. */
const TASK_OUTPUT_KEY = /^task\/[^/]+\/./;

/** The request's token and where it came from; the header wins when both are sent. */
function tokenOf(req: FastifyRequest): { token: string; from: 'header' | 'query' } | undefined {
  const header = req.headers['livepeer-jwt'];
  if (typeof header === 'string' && header !== '') return { token: header.trim(), from: 'header' };
  const query = (req.query as Record<string, unknown> | undefined)?.jwt;
  if (Array.isArray(query)) throw new AuthError('playback refused: send one JWT (?jwt= is given more than once)');
  if (typeof query === 'string' && query !== '') return { token: query, from: 'query' };
  return undefined;
}

/** What a playback policy guards: an asset, or a live stream (live-media-routes.ts). */
export interface Guarded {
  kind: 'asset' | 'stream';
  playbackId: string;
  owner: string;
  playbackPolicy: Record<string, unknown> | null | undefined;
}

type PolicyDeps = Pick<MediaAccessDeps, 'signingKeys' | 'jwtMaxLifetimeSecs'>;

/** What opens a `jwt` asset or stream: a valid token (AuthError otherwise); the one to carry on when it came in the URL. */
async function openedBy(deps: PolicyDeps, guarded: Guarded, req: FastifyRequest): Promise<{ token?: string }> {
  const found = tokenOf(req);
  if (!found)
    throw new AuthError(
      `playback refused: this ${guarded.kind} is private; send a JWT as ?jwt= or the Livepeer-Jwt header`,
    );
  const signer = await verifyPlaybackJwt(deps.signingKeys, {
    token: found.token,
    playbackId: guarded.playbackId,
    owner: guarded.owner,
    maxLifetimeSecs: deps.jwtMaxLifetimeSecs,
  });
  try {
    await deps.signingKeys.markSeen(signer.id);
  } catch (err) {
    // lastSeen is for people; a failed write of it must not stop a playback.
    req.log.warn({ err, signingKeyId: signer.id }, "could not note a signing key's lastSeen");
  }
  // A token sent in the header is sent again by its player; one in the URL must be carried on.
  return found.from === 'query' ? { token: found.token } : {};
}

/** The grant of a file of the asset `playbackId` names, by its playback policy. */
async function assetGrant(deps: MediaAccessDeps, playbackId: string, req: FastifyRequest): Promise<MediaGrant | false> {
  // An asset being deleted (or gone) serves nothing, whatever files are left of it.
  const asset = await deps.assets.byPlaybackId(playbackId);
  if (!asset) return false;
  const guarded = { kind: 'asset', playbackId, owner: asset.owner, playbackPolicy: asset.playback_policy } as const;
  return policyGrant(deps, guarded, req);
}

/** The grant of a request by the playback policy of what it reads (an asset's or a stream's). */
export async function policyGrant(
  deps: PolicyDeps,
  guarded: Guarded,
  req: FastifyRequest,
): Promise<MediaGrant | false> {
  // The origin first, as Livepeer's gate does: a page the policy refuses learns nothing of its tokens.
  const origins = allowedOriginsOf(guarded.playbackPolicy);
  checkOrigin(origins, req.headers.origin);
  const restricted = origins ? { origins } : {};
  const policy = guarded.playbackPolicy?.type ?? 'public';
  if (policy === 'public') return restricted;
  // Only `public` and `jwt` are ever stored (api/contract/asset.ts); anything else opens nothing.
  if (policy !== 'jwt') return false;
  return { ...restricted, opened: await openedBy(deps, guarded, req) };
}

/** The `authorize` hook of mediaRoutes for these stores. */
export function mediaAccess(deps: MediaAccessDeps): (key: string, req: FastifyRequest) => Promise<MediaGrant | false> {
  return async (key, req) => {
    if (TASK_OUTPUT_KEY.test(key)) return {};
    const playbackId = ASSET_KEY.exec(key)?.[1];
    return playbackId === undefined ? false : assetGrant(deps, playbackId, req);
  };
}
