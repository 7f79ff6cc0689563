import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { BuiltinStore } from '../storage/builtin/index.ts';

export interface MediaRoutesDeps {
  store: BuiltinStore;
  /** MEDIAPLANE_STORE_SERVE: stream through, or redirect to a presigned URL (stores with `presign`). */
  serve: 'proxy' | 'redirect';
  presignSeconds: number;
  /** Issue #28 (private playback): whether `req` may read `key`; absent: every key is public. */
  authorize?(key: string, req: FastifyRequest): Promise<boolean>;
}

/** `GET|HEAD /media/<key>`: what the built-in store holds (spec/API.md section C). */
export async function mediaRoutes(_app: FastifyInstance, _deps: MediaRoutesDeps): Promise<void> {}
