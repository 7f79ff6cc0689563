import type { FastifyInstance, RouteOptions } from 'fastify';

declare module 'fastify' {
  interface FastifySchema {
    /** One line for the OpenAPI document. */
    summary?: string;
    description?: string;
    /**
     * OpenAPI's security requirement of the operation: `[]` for a route that asks for no API
     * key (an upload URL's token, a playbackId, a CORS preflight); the API key otherwise.
     */
    security?: Array<Record<string, string[]>>;
    /**
     * A request body that no JSON schema validates, read as raw bytes by the route (an
     * upload's file): its media types, for the document only.
     */
    rawBody?: { description: string; mediaTypes: string[] };
  }
}

interface Op {
  method: string;
  url: string;
  schema: NonNullable<RouteOptions['schema']>;
}

/**
 * One response of the document: a range such as `4xx` is OpenAPI's `4XX`; a null body is no
 * content; a response given per media type (Fastify's `content` form: an SSE stream's
 * `text/event-stream`) is shown as given.
 */
function response(code: string, schema: object): object {
  const { description, content } = schema as { description?: string; content?: object };
  if (content) return { description: description ?? code, content };
  if ((schema as { type?: unknown }).type === 'null') return { description: description ?? code };
  return { description: description ?? code, content: { 'application/json': { schema } } };
}

/** The request body of an operation: its JSON schema, or the raw bytes it reads by media type. */
function requestBody(schema: Op['schema']): object {
  if (schema.body) return { requestBody: { required: true, content: { 'application/json': { schema: schema.body } } } };
  if (!schema.rawBody) return {};
  const binary = { schema: { type: 'string', format: 'binary' } };
  const content = Object.fromEntries(schema.rawBody.mediaTypes.map((type) => [type, binary]));
  return { requestBody: { required: true, description: schema.rawBody.description, content } };
}

/**
 * Collects every route's schema as it is registered and serves them as one OpenAPI 3.1
 * document, so the document is generated from the same schemas that validate requests: the
 * task API's, and the LLM gateway's (chat, models, ledger, registration) where the gateway
 * runs on this app. Routes without a schema (health, metrics, the orchestrator's) stay out.
 * Every operation needs the API key unless its schema says `security: []`.
 */
export function collectOpenApi(app: FastifyInstance, info: { title: string; version: string }): () => object {
  const ops: Op[] = [];
  app.addHook('onRoute', (route) => {
    if (!route.schema) return;
    // Fastify adds a HEAD route of its own beside every GET, with the GET's very schema: that
    // one is left out; a HEAD a route declares (tus, /media) is listed.
    const auto = route.method === 'HEAD' && ops.some((o) => o.method === 'get' && o.schema === route.schema);
    if (auto) return;
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const m of methods) ops.push({ method: m.toLowerCase(), url: route.url, schema: route.schema });
  });
  return () => {
    const paths: Record<string, Record<string, object>> = {};
    for (const op of ops) {
      const path = op.url.replace(/:(\w+)/g, '{$1}');
      const params = [...op.url.matchAll(/:(\w+)/g)].map((m) => ({
        name: m[1],
        in: 'path',
        required: true,
        schema: { type: 'string' },
      }));
      const query = op.schema.querystring as { properties?: Record<string, object> } | undefined;
      for (const [name, schema] of Object.entries(query?.properties ?? {}))
        params.push({ name, in: 'query', required: false, schema: schema as { type: string } });
      // Request headers a route reads (Idempotency-Key), as optional header parameters.
      const headers = op.schema.headers as { properties?: Record<string, object> } | undefined;
      for (const [name, schema] of Object.entries(headers?.properties ?? {}))
        params.push({ name, in: 'header', required: false, schema: schema as { type: string } });
      const responses = Object.fromEntries(
        Object.entries((op.schema.response ?? {}) as Record<string, object>).map(([code, schema]) => [
          code.toUpperCase(),
          response(code, schema),
        ]),
      );
      paths[path] = {
        ...paths[path],
        [op.method]: {
          summary: op.schema.summary,
          description: op.schema.description,
          ...(params.length ? { parameters: params } : {}),
          ...requestBody(op.schema),
          responses: Object.keys(responses).length ? responses : { 200: { description: 'OK' } },
          security: op.schema.security ?? [{ bearer: [] }],
        },
      };
    }
    return {
      openapi: '3.1.0',
      info,
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      paths,
    };
  };
}
