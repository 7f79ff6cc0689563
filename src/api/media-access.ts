import type { FastifyRequest } from 'fastify';
import { type SigningKeyStore, verifyPlaybackJwt } from '../access/index.ts';
import type { AssetStore } from '../assets/index.ts';
import { AuthError } from '../lib/errors.ts';
import type { MediaGrant } from './media-routes.ts';

// Who may read a /media key (issue #28, spec/API.md section C): the `authorize` hook of
// media-routes.ts. Files under `asset/<playbackId>/` follow their asset's playback policy:
// `public` (or none) for anyone; `jwt` for a request with a valid JWT for that asset, signed
// by one of its owner's signing keys, as `?jwt=` or the `Livepeer-Jwt` header (Livepeer's
// two ways); 401 otherwise, saying why. The asset and the key are read on every request (two
// indexed lookups), so a policy change, a disabled or a deleted key holds at once. Outputs of
// POST /api/transcode (`task/...`) stay public: their URLs are the owner's own.

export interface MediaAccessDeps {
  assets: Pick<AssetStore, 'byPlaybackId'>;
  signingKeys: Pick<SigningKeyStore, 'byPublicKey' | 'markSeen'>;
}

const ASSET_KEY = /^asset\/([^/]+)(?:\/|$)/;

/** The request's token and where it came from; the header wins when both are sent. */
function tokenOf(req: FastifyRequest): { token: string; from: 'header' | 'query' } | undefined {
  const header = req.headers['livepeer-jwt'];
  if (typeof header === 'string' && header !== '') return { token: header.trim(), from: 'header' };
  const query = (req.query as Record<string, unknown> | undefined)?.jwt;
  if (Array.isArray(query)) throw new AuthError('playback refused: send one JWT (?jwt= is given more than once)');
  if (typeof query === 'string' && query !== '') return { token: query, from: 'query' };
  return undefined;
}

/** The `authorize` hook of mediaRoutes for these stores. */
export function mediaAccess(deps: MediaAccessDeps): (key: string, req: FastifyRequest) => Promise<MediaGrant> {
  return async (key, req) => {
    const playbackId = ASSET_KEY.exec(key)?.[1];
    if (playbackId === undefined) return true;
    // An asset being deleted (or gone) serves nothing, whatever files are left of it.
    const asset = await deps.assets.byPlaybackId(playbackId);
    if (!asset) return false;
    const policy = asset.playback_policy?.type ?? 'public';
    if (policy === 'public') return true;
    // Only `public` and `jwt` are ever stored (api/contract/asset.ts); anything else opens nothing.
    if (policy !== 'jwt') return false;
    const found = tokenOf(req);
    if (!found)
      throw new AuthError('playback refused: this asset is private; send a JWT as ?jwt= or the Livepeer-Jwt header');
    const signer = await verifyPlaybackJwt(deps.signingKeys, {
      token: found.token,
      playbackId: asset.playback_id,
      owner: asset.owner,
    });
    try {
      await deps.signingKeys.markSeen(signer.id);
    } catch (err) {
      // lastSeen is for people; a failed write of it must not stop a playback.
      req.log.warn({ err, signingKeyId: signer.id }, "could not note a signing key's lastSeen");
    }
    // A token sent in the header is sent again by its player; one in the URL must be carried on.
    return found.from === 'query' ? { token: found.token } : {};
  };
}
