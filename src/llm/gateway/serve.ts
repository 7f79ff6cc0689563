// How a gateway route answers a completion (POST /llm, /v1/chat/completions, /v1/completions):
// the key's owner, the client going away, the ignored fields named in a header, the JSON or
// the stream, and an error on a stream that has not started, answered as the route's error
// handler would. Routes of their own files (gateway/completions.ts, embeddings.ts) get what
// they need from GatewayRoutes, so they import this file and not index.ts.

import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import type { Principal } from '../../accounts/index.ts';
import type { RequestAuth } from '../../lib/request-auth.ts';
import { llmWireErrorFor, logAnswered } from '../../lib/wire-errors.ts';
import type { Ledger } from '../ledger.ts';
import type { ChatRequest } from '../protocol/index.ts';
import { type AnswerShape, type CompleteDeps, complete } from './complete.ts';
import type { OrchestratorPool } from './pool.ts';

/** The response header naming the top-level request fields that were ignored (API.md section B). */
export const IGNORED_FIELDS_HEADER = 'x-mediaplane-ignored-fields';

/** What a gateway route file needs: the completion machinery, the settings and the owner of each request. */
export interface GatewayRoutes {
  settings: GatewaySettings;
  log: Logger;
  complete: CompleteDeps;
  /** The orchestrators (what the model and registration routes read and add to). */
  pool: OrchestratorPool;
  /** The owners' balances and charges (what a route that is no completion charges with). */
  ledger: Ledger;
  /**
   * API keys, checked before a body is read or validated (as on the task API: one auth path,
   * one message): each route names `onRequest: auth.hook`; `auth.of(req).owner` is the key's owner.
   */
  auth: RequestAuth<Principal>;
}

/** The settings the gateway's routes read (config/gateway.ts, config/orchestrator.ts): these, not the whole Config (issue #26). */
export interface GatewaySettings {
  /** MEDIAPLANE_GATEWAY_DEFAULT_MAX_TOKENS: max_tokens of a request that sets none. */
  gatewayDefaultMaxTokens: number;
  /** MEDIAPLANE_ORCHESTRATOR_SECRET: what an orchestrator registering itself must send. */
  orchestratorSecret?: string | undefined;
}

/**
 * Answers one completion for a route: returns the JSON to send (not streaming), or writes the
 * stream itself. `ignored`: the request's unknown top-level fields (protocol.ts unknownFields).
 */
export async function serveCompletion(
  routes: GatewayRoutes,
  req: FastifyRequest,
  reply: FastifyReply,
  o: { body: ChatRequest; shape?: AnswerShape; ignored?: readonly string[] },
): Promise<unknown> {
  const { body } = o;
  const res = reply.raw;
  nameIgnored(res, o.ignored ?? []);
  const gone = clientGone(res);
  if (body.stream) reply.hijack();
  try {
    const key = routes.auth.of(req);
    const out = await complete(routes.complete, {
      owner: key.owner,
      key,
      body,
      res,
      clientGone: gone,
      shape: o.shape,
    });
    if (body.stream) return undefined;
    return reply.send(out.json);
  } catch (err) {
    if (!body.stream) throw err;
    // Hijacked and nothing sent yet: answer the error ourselves, as the scope's handler would.
    const { status, body: errBody, headers } = llmWireErrorFor(req.url)(err);
    logAnswered(routes.log, status, err, req);
    if (!res.headersSent && !res.destroyed)
      res
        .writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers })
        .end(JSON.stringify(errBody));
    return undefined;
  }
}

/**
 * Names the request's unknown top-level fields (protocol.ts unknownFields), if any, in the
 * IGNORED_FIELDS_HEADER of the answer: set on `res` itself, so a hijacked stream has it too.
 */
export function nameIgnored(res: ServerResponse, ignored: readonly string[]): void {
  if (ignored.length > 0) res.setHeader(IGNORED_FIELDS_HEADER, ignoredHeader(ignored));
}

/** OpenAI's "a string or a list of them" fields (prompt, input) as a list. */
export function listOf(x: string | string[]): string[] {
  return typeof x === 'string' ? [x] : x;
}

/** A signal aborted when the client goes away before its answer is all written. */
export function clientGone(res: ServerResponse): AbortSignal {
  const gone = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) gone.abort();
  });
  return gone.signal;
}

const MAX_NAMED = 32;
const MAX_NAME = 64;

/**
 * The header's value: the names, comma-separated. A name is the caller's own text, so anything
 * a header cannot carry (or that would read as a separator) is percent-encoded, and both the
 * names and their count are capped.
 */
function ignoredHeader(names: readonly string[]): string {
  const shown = names.slice(0, MAX_NAMED).map((n) => {
    const cut = n.length > MAX_NAME ? `${n.slice(0, MAX_NAME)}...` : n;
    let out = '';
    for (const b of Buffer.from(cut)) {
      const plain = b > 0x20 && b < 0x7f && b !== 0x2c && b !== 0x25;
      out += plain ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
    }
    return out;
  });
  return names.length > MAX_NAMED ? `${shown.join(', ')}, ...` : shown.join(', ');
}
