import type { FastifyInstance } from 'fastify';
import type { Principal } from '../accounts/index.ts';
import type { AssetStore } from '../assets/index.ts';
import type { RequestAuth } from '../lib/request-auth.ts';
import type { IdempotencyKeys } from './idempotency.ts';
import type { PublicBase } from './public-base.ts';
import type { TranscodeRules } from './validate-transcode.ts';

export interface AssetRoutesDeps {
  auth: RequestAuth<Principal>;
  assets: AssetStore;
  idempotency: IdempotencyKeys;
  publicBase: PublicBase;
  /** The input rules of POST /api/transcode, for POST /api/asset/upload/url. */
  rules: TranscodeRules;
  maxQueuedPerOwner: number;
  requesterSalt: string;
}

/** The asset routes of spec/API.md section C, and GET /api/playback/{playbackId}. */
export async function assetRoutes(_api: FastifyInstance, _deps: AssetRoutesDeps): Promise<void> {}
