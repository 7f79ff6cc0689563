import type { FastifyInstance } from 'fastify';
import type { Principal } from '../accounts/index.ts';
import type { RequestAuth } from '../lib/request-auth.ts';
import { Capabilities } from './contract/capabilities.ts';
import { playerScriptPath } from './player-routes.ts';
import type { PublicBase } from './public-base.ts';
import type { TranscodeRules } from './validate-transcode.ts';

// GET /api/capabilities: what this server is set up to do, for a client to offer only that.
// C2PA signing and the IPFS export with the operator's Storacha space need settings a default
// server lacks; without them a request for either is a 422. A client (the console) reads this
// once and explains, with the setting names, what enabling a feature takes, instead of
// offering a button that can only fail. Read-only, and no secret in it: only whether a
// setting is set, never its value.

export interface CapabilitiesDeps {
  auth: RequestAuth<Principal>;
  rules: Pick<TranscodeRules, 'c2paConfigured' | 'validateDwebProof'>;
  /** MEDIAPLANE_DWEB_EXPORT_PROOF is set. */
  exportProofConfigured?: boolean | undefined;
  publicBase: PublicBase;
}

const C2PA_SETTINGS = ['MEDIAPLANE_C2PA_KEY', 'MEDIAPLANE_C2PA_CERTS'];
const IPFS_SETTINGS = ['MEDIAPLANE_DWEB_EXPORT_PROOF'];

export function capabilitiesOf(deps: Omit<CapabilitiesDeps, 'auth'>): Capabilities {
  const c2pa = deps.rules.c2paConfigured;
  const ipfs = deps.exportProofConfigured === true && deps.rules.validateDwebProof !== undefined;
  return {
    c2pa: {
      enabled: c2pa,
      settings: C2PA_SETTINGS,
      about: c2pa
        ? "MP4 renditions are signed with the server's key and certificate chain."
        : 'The server operator sets MEDIAPLANE_C2PA_KEY and MEDIAPLANE_C2PA_CERTS (PEM files: a signing key and its certificate chain) and restarts the server.',
    },
    ipfsExport: {
      enabled: ipfs,
      ownProof: deps.rules.validateDwebProof !== undefined,
      settings: IPFS_SETTINGS,
      about: ipfs
        ? 'Exports go to the Storacha space the server operator delegated.'
        : "The server operator sets MEDIAPLANE_DWEB_EXPORT_PROOF (a delegation of a Storacha space to the server's agent) and restarts the server.",
    },
    player: { hlsJsUrl: `${deps.publicBase()}${playerScriptPath}` },
  };
}

export async function capabilitiesRoutes(api: FastifyInstance, deps: CapabilitiesDeps): Promise<void> {
  api.get(
    '/capabilities',
    {
      onRequest: deps.auth.hook,
      schema: {
        summary: 'What this server is set up to do',
        description:
          "Whether the features that need server settings are enabled (C2PA signing, IPFS exports to the server's Storacha space), the names of the settings that enable them, and the URL of the server's copy of hls.js for embedded players. Nothing here changes per key.",
        response: { 200: Capabilities },
      },
    },
    async () => capabilitiesOf(deps),
  );
}
