import { Type } from '@sinclair/typebox';
import type { UploadGrant, UploadSessions, UploadStaging } from '../assets/index.ts';
import { BadRequestError, NotFoundError } from '../lib/errors.ts';
import type { PublicBase } from './public-base.ts';

// What the direct and the tus upload routes share (upload-routes.ts, tus-routes.ts).

export interface UploadRoutesDeps {
  /** Who may upload what (the grants of upload tokens). */
  sessions: UploadSessions;
  /** Staging and completion of uploads, built in main.ts. */
  staging: UploadStaging;
  publicBase: PublicBase;
}

export const TokenQuery = Type.Object({
  token: Type.Optional(
    Type.String({ maxLength: 200, description: 'The upload token of POST /api/asset/request-upload (its URLs)' }),
  ),
});
export interface TokenQuery {
  token?: string;
}

/** Headers of every upload answer, for browsers: any origin, the tus headers readable (tus-js-client reads them). */
export const CORS = {
  'access-control-allow-origin': '*',
  'access-control-expose-headers':
    'Location, Upload-Offset, Upload-Length, Upload-Expires, Upload-Metadata, Tus-Version, Tus-Resumable, Tus-Max-Size, Tus-Extension',
};

/** A preflight's answer may be reused for a day (browsers cap it lower). */
export const PREFLIGHT_MAX_AGE = '86400';

/** The grant `token` names, for `assetId` when given; a NotFoundError for anything else. */
export async function grantFor(
  sessions: UploadSessions,
  token: string | undefined,
  assetId?: string,
): Promise<UploadGrant> {
  const grant = token ? await sessions.grant(token) : undefined;
  if (!grant || (assetId !== undefined && grant.assetId !== assetId)) throw new NotFoundError();
  return grant;
}

/** A header that counts bytes: a whole number, or a 400 naming it. */
export function byteCount(value: string | string[] | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !/^\d{1,16}$/.test(value))
    throw new BadRequestError(`${name} must be a whole number of bytes`);
  return Number(value);
}
