import { defineSettings } from './types.ts';

// Settings of the dweb domain (see types.ts for the shape of an entry). The defaults reach
// the public Storacha network; tests point them at a local upload service.
export const dwebSettings = defineSettings({
  dwebServiceUrl: {
    env: 'MEDIAPLANE_DWEB_SERVICE_URL',
    type: 'string',
    group: 'dweb',
    default: 'https://up.storacha.network',
    description: 'URL of the Storacha upload service that outputs with storage type dweb.storage are sent to.',
  },
  dwebServiceDid: {
    env: 'MEDIAPLANE_DWEB_SERVICE_DID',
    type: 'string',
    group: 'dweb',
    default: 'did:web:up.storacha.network',
    description: 'DID of that upload service (the audience of the invocations).',
  },
  dwebReceiptsUrl: {
    env: 'MEDIAPLANE_DWEB_RECEIPTS_URL',
    type: 'string',
    group: 'dweb',
    default: undefined,
    defaultText: '<service URL>/receipt/',
    description: 'Where the client polls for upload receipts.',
  },
  dwebAgentKey: {
    env: 'MEDIAPLANE_DWEB_AGENT_KEY',
    type: 'string',
    group: 'dweb',
    default: undefined,
    defaultText: 'generated on first start, kept in <data dir>/dweb-agent.key',
    secret: true,
    description:
      "The service's Ed25519 agent key (a did:key principal, as `ucan-key ed` prints it) that callers delegate their space to.",
  },
  dwebExportProof: {
    env: 'MEDIAPLANE_DWEB_EXPORT_PROOF',
    type: 'string',
    group: 'dweb',
    default: undefined,
    defaultText: 'none: an asset export to IPFS must bring its own ipfs.credentials.proof',
    secret: true,
    description:
      "A base64 UCAN delegation of the operator's Storacha space to the agent: where asset exports to IPFS go when they bring no proof of their own (POST /api/asset/{id}/export {ipfs: {}}, as Livepeer's clients send it).",
  },
  dwebGateway: {
    env: 'MEDIAPLANE_DWEB_GATEWAY',
    type: 'string',
    group: 'dweb',
    default: 'https://storacha.link',
    description: 'IPFS gateway for the per-file URLs of dweb outputs (path style: <gateway>/ipfs/<root>/<path>).',
  },
});
