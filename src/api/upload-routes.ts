import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { NotFoundError, PayloadTooLargeError } from '../lib/errors.ts';
import { fromFastifyError, logAnswered, TasksErrorBody, tasksWireError } from '../lib/wire-errors.ts';
import type { PublicBase } from './public-base.ts';
import { byteCount, CORS, grantFor, PREFLIGHT_MAX_AGE, TokenQuery, type UploadRoutesDeps } from './upload-common.ts';
import { TUS_VERSION, TusVersionError, tusRoutes } from './tus-routes.ts';

// The upload URLs of POST /api/asset/request-upload (issue #27, spec/API.md section C): a
// direct PUT of the whole file, or tus 1.0 (tus-routes.ts). As on Livepeer they need no API
// key: the token in the URL is the capability, for one asset, until it expires; a wrong,
// expired or spent one is a 404 like any unknown resource. The token is in the query string,
// which the logger scrubs (lib/log.ts: `token=`); it is never logged or answered otherwise.

export type { UploadRoutesDeps };

/** The two upload URLs of POST /api/asset/request-upload for one upload token. */
export function uploadUrls(base: PublicBase, token: string): { url: string; tusEndpoint: string } {
  return {
    url: `${base()}/api/asset/upload/direct?token=${token}`,
    tusEndpoint: `${base()}/api/asset/upload/tus?token=${token}`,
  };
}

/**
 * Errors in the task API's shape, but with their own status: tus clients act on 409 (resume
 * from the server's offset), 412 and 415, which the task API answers as 400s.
 */
function uploadErrorHandler(err: unknown, req: FastifyRequest, reply: FastifyReply): FastifyReply {
  const e = fromFastifyError(err);
  const { body, headers } = tasksWireError(e);
  logAnswered(req.log, e.statusCode, err, req);
  if (headers) reply.headers(headers);
  if (e instanceof TusVersionError) reply.header('tus-version', TUS_VERSION);
  // A body refused before or while it came is left unread: the connection cannot carry another request.
  if (!req.raw.complete) reply.header('connection', 'close');
  return reply.status(e.statusCode).send(body);
}

/** Direct PUT and tus 1.0 uploads; no API key: the token in the URL is the capability. */
export async function uploadRoutes(api: FastifyInstance, deps: UploadRoutesDeps): Promise<void> {
  await api.register(async (scope) => {
    // The body is the file, of any type and size: no parser of the API's (JSON, bodyLimit) reads
    // it; each route streams the request itself.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_req, _payload, done) => done(null));
    scope.setErrorHandler(uploadErrorHandler);
    scope.addHook('onSend', async (_req, reply, payload) => {
      reply.headers(CORS);
      return payload;
    });
    directUploadRoutes(scope, deps);
    await scope.register((tus) => tusRoutes(tus, deps));
  });
}

function directUploadRoutes(scope: FastifyInstance, deps: UploadRoutesDeps): void {
  scope.put<{ Querystring: TokenQuery }>(
    '/asset/upload/direct',
    {
      config: { longBody: true },
      schema: {
        summary: 'Upload an asset file in one request (the `url` of POST /api/asset/request-upload)',
        security: [],
        rawBody: {
          description: 'The file, raw (any Content-Type is taken as such)',
          mediaTypes: ['application/octet-stream'],
        },
        description:
          "The raw file is the body, of any Content-Type. No API key: the token is the capability. 413 when the body is larger than MEDIAPLANE_UPLOAD_MAX_BYTES, or would take the owner's unfinished uploads past MEDIAPLANE_UPLOAD_MAX_STAGED_BYTES_PER_OWNER (nothing is kept); 404 for a wrong, expired or used token.",
        querystring: TokenQuery,
        response: {
          200: Type.Null({ description: 'Stored; the asset is processed next (empty body, as Livepeer answers)' }),
          '4xx': TasksErrorBody,
        },
      },
    },
    async (req, reply) => {
      const grant = await grantFor(deps.sessions, req.query.token);
      const length = byteCount(req.headers['content-length'], 'Content-Length');
      if (length !== undefined && length > deps.staging.maxBytes)
        throw new PayloadTooLargeError(`the file is larger than the ${deps.staging.maxBytes} bytes allowed`);
      await deps.staging.put(grant, req.raw, { length });
      if (!(await deps.staging.complete(grant))) throw new NotFoundError();
      req.log.info({ assetId: grant.assetId }, 'direct upload stored');
      return reply.status(200).send();
    },
  );
  scope.options(
    '/asset/upload/direct',
    {
      schema: {
        summary: 'CORS preflight of the direct upload',
        security: [],
        response: { 204: Type.Null({ description: 'The methods and headers a browser may send' }) },
      },
    },
    async (_req, reply) =>
      reply
        .headers({
          'access-control-allow-methods': 'PUT, OPTIONS',
          'access-control-allow-headers': 'Content-Type',
          'access-control-max-age': PREFLIGHT_MAX_AGE,
        })
        .status(204)
        .send(),
  );
}
