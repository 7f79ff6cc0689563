import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Principal } from '../accounts/index.ts';
import { type AssetStore, type ExportTarget, RESERVED_HEADERS, startExport, startExportData } from '../assets/index.ts';
import { ValidationError } from '../lib/errors.ts';
import { hostNotAllowed, hostProblem } from '../lib/net-guard.ts';
import type { RequestAuth } from '../lib/request-auth.ts';
import { TasksErrorBody } from '../lib/wire-errors.ts';
import type { TaskStore } from '../tasks/index.ts';
import { ExportBody, ExportDataBody, HEADER_NAME } from './contract/export.ts';
import { toWireTask } from './contract/index.ts';
import { createRoute } from './create-route.ts';
import type { IdempotencyKeys } from './idempotency.ts';
import type { PublicBase } from './public-base.ts';
import { requesterId } from './requester-id.ts';
import { TaskSchema } from './routes.ts';
import type { TranscodeRules } from './validate-transcode.ts';

// POST /api/asset/{id}/export and POST /api/export-data (issue #28, spec/API.md section C):
// the routes check what a task could only fail on later (the URL, the headers, the proof) and
// queue an `export` or `export-data` task; assets/export.ts runs them.
//
// Livepeer creates `export-data` tasks only from an experiment of its own (signed video
// attestations, POST /api/experiment/-/attestation): there is no public route to copy, so the
// route is ours, named after the task type, and its body is the task's `params.exportData`.

export interface ExportRoutesDeps {
  auth: RequestAuth<Principal>;
  assets: AssetStore;
  tasks: TaskStore;
  /** allowPrivateUrls (the address guard) and validateDwebProof (the proof's checks). */
  rules: Pick<TranscodeRules, 'allowPrivateUrls' | 'validateDwebProof'>;
  /** Whether MEDIAPLANE_DWEB_EXPORT_PROOF is set: then an IPFS export may come without a proof. */
  exportProofConfigured?: boolean | undefined;
  idempotency: IdempotencyKeys;
  publicBase: PublicBase;
  maxQueuedPerOwner: number;
  requesterSalt: string;
}

const AssetId = Type.Object({ id: Type.String({ maxLength: 64 }) });
const Answer = Type.Object({ task: TaskSchema });

export async function exportRoutes(api: FastifyInstance, deps: ExportRoutesDeps): Promise<void> {
  const { auth } = deps;
  // No Idempotency-Key here: kept answers are told apart by route and body, and this route's
  // asset is in its path, so one key would replay the first asset's task for another asset.
  // Livepeer takes none either; a repeated request exports the same bytes once more.
  api.post<{ Params: Static<typeof AssetId>; Body: ExportBody }>(
    '/asset/:id/export',
    {
      onRequest: auth.hook,
      schema: {
        summary: "Export an asset's file: to a URL of yours (`custom`) or to IPFS (`ipfs`), by an `export` task",
        params: AssetId,
        body: ExportBody,
        response: { 200: Answer, 404: TasksErrorBody, 422: TasksErrorBody, 429: TasksErrorBody },
      },
    },
    async (req) => {
      const who = auth.of(req);
      const target = await checkExport(req.body, deps);
      const task = await startExport(deps, {
        owner: who.owner,
        assetId: req.params.id,
        target,
        requesterId: requesterId(deps.requesterSalt, req.ip),
        maxQueuedPerOwner: deps.maxQueuedPerOwner,
        key: who,
      });
      req.log.info(
        { taskId: task.id, assetId: req.params.id, to: 'custom' in target ? 'custom' : 'ipfs' },
        'export queued',
      );
      return { task: toWireTask(task, deps.publicBase) };
    },
  );

  createRoute<ExportDataBody>(api, {
    url: '/export-data',
    summary: 'Put a JSON document on IPFS (an `export-data` task; its output is the CID)',
    body: ExportDataBody,
    answer: Answer,
    auth,
    idempotency: deps.idempotency,
    create: async (req, who) => {
      const b = req.body;
      const problems: string[] = [];
      const proof = await checkIpfs('ipfs', b.ipfs ?? {}, deps, problems);
      if (problems.length > 0) throw new ValidationError(problems);
      const task = await startExportData(deps, {
        owner: who.owner,
        projectId: who.projectId,
        content: b.content,
        type: b.type,
        id: b.id,
        proof,
        requesterId: requesterId(deps.requesterSalt, req.ip),
        maxQueuedPerOwner: deps.maxQueuedPerOwner,
        key: who,
      });
      return { task: toWireTask(task, deps.publicBase) };
    },
  });
}

/** The body as an ExportTarget, or a ValidationError naming every problem. */
async function checkExport(b: ExportBody, deps: ExportRoutesDeps): Promise<ExportTarget> {
  if ((b.custom === undefined) === (b.ipfs === undefined))
    throw new ValidationError('custom, ipfs: give exactly one of them (where the file goes)');
  const problems: string[] = [];
  if (b.custom) {
    await checkUrl(b.custom.url, deps, problems);
    checkHeaders(b.custom.headers ?? {}, problems);
    if (problems.length > 0) throw new ValidationError(problems);
    const method = b.custom.method?.toUpperCase() === 'POST' ? 'POST' : 'PUT';
    return { custom: { url: b.custom.url, method, ...(b.custom.headers ? { headers: b.custom.headers } : {}) } };
  }
  const ipfs = b.ipfs ?? {};
  const proof = await checkIpfs('ipfs', ipfs, deps, problems);
  if (problems.length > 0) throw new ValidationError(problems);
  return {
    ipfs: {
      ...(ipfs.nftMetadataTemplate ? { nftMetadataTemplate: ipfs.nftMetadataTemplate } : {}),
      ...(ipfs.nftMetadata ? { nftMetadata: ipfs.nftMetadata } : {}),
      ...(proof ? { proof } : {}),
    },
  };
}

/** The rules of a custom export's URL: http(s), no credentials in it, an allowed address. */
async function checkUrl(text: string, deps: ExportRoutesDeps, problems: string[]): Promise<void> {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    problems.push('custom.url: must be a valid URL');
    return;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    problems.push(`custom.url: must be an http:// or https:// URL (not ${url.protocol})`);
    return;
  }
  // The URL is shown in the task (its query left out) and in messages: credentials go in headers.
  if (url.username || url.password)
    problems.push('custom.url: must not hold a user name or password; send credentials in custom.headers');
  const problem = await hostProblem(url, { allowPrivate: deps.rules.allowPrivateUrls });
  if (problem) problems.push(`custom.url: ${hostNotAllowed(url, problem)}`);
}

/** Header names are tokens the request does not set itself; values are secrets, never quoted. */
function checkHeaders(headers: Record<string, string>, problems: string[]): void {
  for (const [name, value] of Object.entries(headers)) {
    if (!HEADER_NAME.test(name)) {
      problems.push(`custom.headers: ${JSON.stringify(name.slice(0, 64))} is not a valid header name`);
      continue;
    }
    if (RESERVED_HEADERS.has(name.toLowerCase()))
      problems.push(`custom.headers.${name}: is set by the export itself and cannot be given`);
    // What an HTTP/1.1 header value may hold (RFC 9110 5.5; Node refuses the rest).
    if (/[^\t\x20-\x7e\x80-\xff]/.test(value))
      problems.push(`custom.headers.${name}: must hold only Latin-1 characters`);
  }
}

/** The proof of an IPFS export (undefined: the server's own); its problems added to `problems`. */
async function checkIpfs(
  field: string,
  ipfs: { credentials?: { proof: string } | undefined; pinata?: unknown },
  deps: ExportRoutesDeps,
  problems: string[],
): Promise<string | undefined> {
  if (ipfs.pinata !== undefined)
    problems.push(
      `${field}.pinata: Piñata is not available on this server: its IPFS exports go to Storacha (${field}.credentials.proof)`,
    );
  const proof = ipfs.credentials?.proof;
  const validate = deps.rules.validateDwebProof;
  if (!validate) {
    problems.push(`${field}: IPFS is not available on this server`);
  } else if (proof !== undefined) {
    try {
      await validate(proof, `${field}.credentials.proof`);
    } catch (err) {
      if (err instanceof ValidationError) problems.push(...err.details);
      else throw err;
    }
  } else if (!deps.exportProofConfigured) {
    problems.push(
      `${field}.credentials.proof: is required: this server has no Storacha space of its own for exports; delegate yours to its agent (docs/c2pa-dweb.md)`,
    );
  }
  return proof;
}
