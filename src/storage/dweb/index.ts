// Decentralized storage output (issue 5): the service's UCAN agent, request-time proof
// checks, publishing an output folder to a Storacha space, and the dweb ObjectStore.
import type { Config } from '../../config/index.ts';
import type { ObjectStore, StorageTarget } from '../types.ts';
import { loadAgent, type AgentSigner } from './agent.ts';
import { DwebObjectStore } from './store.ts';

export { loadAgent, AGENT_KEY_FILE, type AgentSigner } from './agent.ts';
export { validateDwebProof, REQUIRED_ABILITIES, type CheckedProof } from './proof.ts';
export {
  publishDirectory,
  publishFile,
  gatewayUrl,
  type PublishOptions,
  type PublishResult,
  type PublishedFile,
} from './publish.ts';
export { DwebObjectStore, type DwebStoreOptions } from './store.ts';

export type DwebConfig = Pick<
  Config,
  'dataDir' | 'dwebAgentKey' | 'dwebServiceUrl' | 'dwebServiceDid' | 'dwebReceiptsUrl' | 'dwebGateway'
>;

/** The agent's did:key, what users delegate their space to (`mediaplane agent did`). */
export async function agentDid(config: Pick<Config, 'dataDir' | 'dwebAgentKey'>): Promise<string> {
  return (await loadAgent(config)).did();
}

/**
 * The factory for storage/index.ts `createObjectStore` (`factories['dweb.storage']` and
 * `factories['web3.storage']`), built once by the composition root with the loaded agent.
 */
export function dwebStoreFactory(
  config: DwebConfig,
  agent: AgentSigner,
  stagingParent?: string,
): (storage: StorageTarget) => ObjectStore {
  return (storage) => {
    if (storage.type === 's3') throw new TypeError('dwebStoreFactory called for s3 storage');
    return new DwebObjectStore({
      proof: storage.credentials.proof,
      agent,
      serviceUrl: config.dwebServiceUrl,
      serviceDid: config.dwebServiceDid,
      ...(config.dwebReceiptsUrl ? { receiptsUrl: config.dwebReceiptsUrl } : {}),
      gateway: config.dwebGateway,
      ...(stagingParent ? { stagingParent } : {}),
    });
  };
}
