import type { FastifyInstance } from 'fastify';
import type { UploadSessions, UploadStaging } from '../assets/index.ts';
import type { PublicBase } from './public-base.ts';

export interface UploadRoutesDeps {
  sessions: UploadSessions;
  staging: UploadStaging;
  publicBase: PublicBase;
}

/** The two upload URLs of POST /api/asset/request-upload for one upload token. */
export function uploadUrls(base: PublicBase, token: string): { url: string; tusEndpoint: string } {
  return {
    url: `${base()}/api/asset/upload/direct?token=${token}`,
    tusEndpoint: `${base()}/api/asset/upload/tus?token=${token}`,
  };
}

/** Direct PUT and tus 1.0 uploads; no API key: the token in the URL is the capability. */
export async function uploadRoutes(_api: FastifyInstance, _deps: UploadRoutesDeps): Promise<void> {}
