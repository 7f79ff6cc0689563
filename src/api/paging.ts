// The paged lists of the task API (tasks, webhooks, a webhook's deliveries): one query schema,
// one reader of a page and one link builder for all of them.

import { type Static, Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';

export const ListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
    cursor: Type.Optional(Type.String({ maxLength: 64 })),
  },
  { additionalProperties: false },
);
export type ListQuery = Static<typeof ListQuery>;

/** What a store's list reads: a page's size and where it starts. */
export interface PageOptions {
  limit: number;
  cursor?: string | undefined;
}

/**
 * One page of a list route: `read` gets the query's limit (20 when absent) and cursor, and the
 * answer's `Link` names the next page when there is one (linkNext).
 */
export async function pageOf<P extends { next: string | null }>(
  req: FastifyRequest<{ Querystring: ListQuery }>,
  reply: FastifyReply,
  o: { publicUrl?: string | undefined; read(page: PageOptions): Promise<P> },
): Promise<P> {
  const limit = req.query.limit ?? 20;
  const page = await o.read({ limit, cursor: req.query.cursor });
  linkNext(req, reply, { publicUrl: o.publicUrl, limit, next: page.next });
  return page;
}

/**
 * `Link: <...>; rel="next"` of a list page, when there is a next one: the one link builder of
 * every paged route. Never built from what the client chooses, neither the Host header (issue
 * #15) nor the request target, which may be absolute-form `http://evil.example/...` (issue
 * #25): the path is the route's template with its validated params filled in, relative (RFC
 * 8288 resolves it against the request URL) or under MEDIAPLANE_PUBLIC_URL.
 */
export function linkNext(
  req: FastifyRequest,
  reply: FastifyReply,
  o: { publicUrl?: string | undefined; limit: number; next: string | null },
): void {
  if (!o.next) return;
  const params: object = typeof req.params === 'object' && req.params !== null ? req.params : {};
  const path = (req.routeOptions.url ?? '').replace(/:(\w+)/g, (_, name: string) =>
    encodeURIComponent(String(Reflect.get(params, name) ?? '')),
  );
  const base = o.publicUrl?.replace(/\/+$/, '') ?? '';
  reply.header('link', `<${base}${path}?limit=${o.limit}&cursor=${encodeURIComponent(o.next)}>; rel="next"`);
}
