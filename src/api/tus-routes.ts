import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { UploadGrant, UploadStaging } from '../assets/index.ts';
import { BadRequestError, MediaplaneError, NotFoundError, UnsupportedContentTypeError } from '../lib/errors.ts';
import { TasksErrorBody } from '../lib/wire-errors.ts';
import type { PublicBase } from './public-base.ts';
import { byteCount, grantFor, PREFLIGHT_MAX_AGE, TokenQuery, type UploadRoutesDeps } from './upload-common.ts';

// tus 1.0 resumable uploads (https://tus.io/protocols/resumable-upload) at the `tusEndpoint`
// of POST /api/asset/request-upload: the core protocol (HEAD, PATCH, OPTIONS) and the
// creation, termination and expiration extensions. One upload resource per asset, at
// `/api/asset/upload/tus/<assetId>?token=T`; its bytes stage where assets/staging.ts says (the
// data dir, or the built-in store's bucket, where any API process takes the next request), so
// an upload resumes after a dropped connection or a restart of the service.

export const TUS_VERSION = '1.0.0';
const TUS_EXTENSIONS = 'creation,termination,expiration';
const TUS_CONTENT_TYPE = 'application/offset+octet-stream';
// What tus-js-client sends from a browser; a preflight must allow each.
const TUS_REQUEST_HEADERS =
  'Tus-Resumable, Upload-Length, Upload-Offset, Upload-Metadata, Upload-Defer-Length, Upload-Concat, Content-Type, X-Requested-With';

/** A request for another tus version than 1.0.0 (tus 1.0: 412, with the versions served). */
export class TusVersionError extends MediaplaneError {
  readonly code = 'tus_version_unsupported';
  readonly statusCode = 412;
}

const AssetParam = Type.Object({ id: Type.String({ maxLength: 100, description: 'The asset id' }) });
interface AssetParam {
  id: string;
}
const header = (description: string) => Type.Optional(Type.String({ description }));
const TusResumable = header('1.0.0 (every request but OPTIONS)');
const NoContent = (description: string) => Type.Null({ description });

/** The upload resource of `grant`: its Location, absolute, with the token that grants it. */
function resourceUrl(base: PublicBase, assetId: string, token: string): string {
  return `${base()}/api/asset/upload/tus/${encodeURIComponent(assetId)}?token=${encodeURIComponent(token)}`;
}

/** RFC 9110 HTTP-date, as tus's expiration extension writes Upload-Expires. */
const expires = (grant: UploadGrant) => grant.expiresAt.toUTCString();

/** The tus routes; `scope` is their own, so their hooks touch nothing else. */
export async function tusRoutes(scope: FastifyInstance, deps: UploadRoutesDeps): Promise<void> {
  scope.addHook('onRequest', async (req) => {
    // tus 1.0: every request but OPTIONS names the version it speaks.
    if (req.method !== 'OPTIONS' && req.headers['tus-resumable'] !== TUS_VERSION)
      throw new TusVersionError(`Tus-Resumable must be ${TUS_VERSION}`);
  });
  scope.addHook('onSend', async (_req, reply, payload) => {
    reply.header('tus-resumable', TUS_VERSION);
    return payload;
  });
  for (const url of ['/asset/upload/tus', '/asset/upload/tus/:id']) optionsRoute(scope, url, deps.staging);
  creationRoute(scope, deps);
  resourceRoutes(scope, deps);
}

/** OPTIONS: what this server speaks (tus 1.0), and a browser's preflight answered in the same reply. */
function optionsRoute(scope: FastifyInstance, url: string, staging: UploadStaging): void {
  scope.options(
    url,
    {
      schema: {
        summary: 'tus: the versions, extensions and largest upload served (and the CORS preflight)',
        security: [],
        response: { 204: NoContent('Tus-Version, Tus-Extension and Tus-Max-Size in the headers') },
      },
    },
    async (_req, reply) =>
      reply
        .headers({
          'tus-version': TUS_VERSION,
          'tus-extension': TUS_EXTENSIONS,
          'tus-max-size': String(staging.maxBytes),
          'access-control-allow-methods': 'POST, HEAD, PATCH, DELETE, OPTIONS',
          'access-control-allow-headers': TUS_REQUEST_HEADERS,
          'access-control-max-age': PREFLIGHT_MAX_AGE,
        })
        .status(204)
        .send(),
  );
}

/** POST: creation. The asset has one upload resource; creating it again starts it over at the same Location. */
function creationRoute(scope: FastifyInstance, deps: UploadRoutesDeps): void {
  scope.post<{ Querystring: TokenQuery }>(
    '/asset/upload/tus',
    {
      schema: {
        summary: 'tus: create the upload of the asset (the `tusEndpoint` of POST /api/asset/request-upload)',
        security: [],
        description:
          "No API key: the token is the capability. Upload-Length is required (Upload-Defer-Length is not supported: 400); Upload-Metadata is accepted and ignored. 413 above Tus-Max-Size, or when Upload-Length would take the owner's unfinished uploads past MEDIAPLANE_UPLOAD_MAX_STAGED_BYTES_PER_OWNER.",
        querystring: TokenQuery,
        headers: Type.Object({
          'tus-resumable': TusResumable,
          'upload-length': header('The size of the whole file in bytes (required)'),
          'upload-metadata': header('Accepted and ignored'),
        }),
        response: {
          201: NoContent('Created: Location is the upload resource (absolute), Upload-Expires when its URL expires'),
          '4xx': TasksErrorBody,
        },
      },
    },
    async (req, reply) => {
      const grant = await grantFor(deps.sessions, req.query.token);
      if (req.headers['upload-defer-length'] !== undefined)
        throw new BadRequestError('Upload-Defer-Length is not supported: send Upload-Length');
      const length = byteCount(req.headers['upload-length'], 'Upload-Length');
      if (length === undefined) throw new BadRequestError('Upload-Length is required');
      await deps.staging.create(grant, { length });
      // An empty file is whole once created (tus 1.0: no PATCH follows).
      if (length === 0) await complete(deps, grant);
      req.log.info({ assetId: grant.assetId, length }, 'tus upload created');
      return reply
        .headers({
          location: resourceUrl(deps.publicBase, grant.assetId, req.query.token ?? ''),
          'upload-expires': expires(grant),
        })
        .status(201)
        .send();
    },
  );
}

/** The upload is whole: into the store, its task queued; a 404 when it can no longer finish (expired, deleted). */
async function complete(deps: UploadRoutesDeps, grant: UploadGrant): Promise<void> {
  if (!(await deps.staging.complete(grant))) throw new NotFoundError();
}

const RESOURCE = '/asset/upload/tus/:id';
type ResourceRequest = { Params: AssetParam; Querystring: TokenQuery };
/** The grant of a request for the upload resource: its token's, for the asset its path names. */
const grantOf = (deps: UploadRoutesDeps, req: { params: AssetParam; query: TokenQuery }) =>
  grantFor(deps.sessions, req.query.token, req.params.id);

function resourceRoutes(scope: FastifyInstance, deps: UploadRoutesDeps): void {
  headRoute(scope, deps);
  patchRoute(scope, deps);
  deleteRoute(scope, deps);
}

/** HEAD: where the upload stands, for a client that resumes. */
function headRoute(scope: FastifyInstance, deps: UploadRoutesDeps): void {
  scope.route<ResourceRequest>({
    method: 'HEAD',
    url: RESOURCE,
    schema: {
      summary: 'tus: where the upload stands (Upload-Offset, Upload-Length)',
      security: [],
      params: AssetParam,
      querystring: TokenQuery,
      headers: Type.Object({ 'tus-resumable': TusResumable }),
      response: { 200: NoContent('Upload-Offset, Upload-Length and Upload-Expires in the headers') },
    },
    handler: async (req, reply) => {
      const grant = await grantOf(deps, req);
      const now = await deps.staging.status(grant.assetId);
      if (!now) throw new NotFoundError();
      // Whole but not stored: the service stopped, or the store failed, between the last byte
      // and the store. Finished here, or a client told "nothing left to send" would wait forever.
      if (now.length === now.offset) await complete(deps, grant);
      return reply
        .headers({
          'cache-control': 'no-store',
          'upload-offset': String(now.offset),
          ...(now.length === undefined ? {} : { 'upload-length': String(now.length) }),
          'upload-expires': expires(grant),
        })
        .status(200)
        .send();
    },
  });
}

/** PATCH: bytes at the offset; the last byte stores the upload and queues its asset. */
function patchRoute(scope: FastifyInstance, deps: UploadRoutesDeps): void {
  scope.patch<ResourceRequest>(
    RESOURCE,
    {
      config: { longBody: true },
      schema: {
        summary: 'tus: append bytes at Upload-Offset',
        security: [],
        rawBody: { description: 'The bytes from Upload-Offset on', mediaTypes: [TUS_CONTENT_TYPE] },
        description:
          'Content-Type must be application/offset+octet-stream (415); Upload-Offset must be where the upload stands (409). The upload is stored and processed once its last byte is in.',
        params: AssetParam,
        querystring: TokenQuery,
        headers: Type.Object({
          'tus-resumable': TusResumable,
          'upload-offset': header('Where these bytes start (required)'),
          'content-type': header('application/offset+octet-stream'),
        }),
        response: { 204: NoContent('Taken: Upload-Offset is the new offset'), '4xx': TasksErrorBody },
      },
    },
    async (req, reply) => {
      const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
      if (type !== TUS_CONTENT_TYPE) throw new UnsupportedContentTypeError(`Content-Type must be ${TUS_CONTENT_TYPE}`);
      const grant = await grantOf(deps, req);
      const offset = byteCount(req.headers['upload-offset'], 'Upload-Offset');
      if (offset === undefined) throw new BadRequestError('Upload-Offset is required');
      const length = byteCount(req.headers['content-length'], 'Content-Length');
      const now = await deps.staging.append(grant.assetId, req.raw, { expectedOffset: offset, length });
      if (now.offset === now.length) await complete(deps, grant);
      return reply
        .headers({ 'upload-offset': String(now.offset), 'upload-expires': expires(grant) })
        .status(204)
        .send();
    },
  );
}

/** DELETE: termination. */
function deleteRoute(scope: FastifyInstance, deps: UploadRoutesDeps): void {
  scope.delete<ResourceRequest>(
    RESOURCE,
    {
      schema: {
        summary: 'tus: terminate the upload; its bytes are freed',
        security: [],
        params: AssetParam,
        querystring: TokenQuery,
        headers: Type.Object({ 'tus-resumable': TusResumable }),
        response: { 204: NoContent('Terminated'), '4xx': TasksErrorBody },
      },
    },
    async (req, reply) => {
      const grant = await grantOf(deps, req);
      if (!(await deps.staging.status(grant.assetId))) throw new NotFoundError();
      // The asset stays `uploading` until its URL expires (then the expiry sweep fails it), and
      // the token keeps its power until then: termination frees the bytes of this attempt, and
      // a client may create the upload again (a new file chosen, say) with the same URL. The
      // asset fails, or goes with DELETE /api/asset/{id}, as its owner decides.
      await deps.staging.remove(grant.assetId);
      req.log.info({ assetId: grant.assetId }, 'tus upload terminated');
      return reply.status(204).send();
    },
  );
}
