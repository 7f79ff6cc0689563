import { join } from 'node:path';
import * as ed25519 from '@ucanto/principal/ed25519';
import type { Config } from '../../config/index.ts';
import { ConfigError } from '../../config/index.ts';
import { readOrCreate, StateFileError } from '../../lib/state-file.ts';

// The service's own UCAN identity (issue 5): users delegate their Storacha space to this
// did:key, and the service signs its upload invocations with the key. It is generated on
// first start and kept in the data directory, or given by MEDIAPLANE_DWEB_AGENT_KEY (in the
// `ucan-key ed` / Storacha CLI format) so several workers can share one identity.

export type AgentSigner = ed25519.EdSigner;
export const AGENT_KEY_FILE = 'dweb-agent.key';

export async function loadAgent(config: Pick<Config, 'dataDir' | 'dwebAgentKey'>): Promise<AgentSigner> {
  if (config.dwebAgentKey) {
    try {
      return ed25519.parse(config.dwebAgentKey.trim());
    } catch {
      // The parser's message could echo the key: say only which setting is wrong.
      throw new ConfigError([
        'MEDIAPLANE_DWEB_AGENT_KEY: is not an Ed25519 private key in the Storacha format (base64pad multibase, starting with "M")',
      ]);
    }
  }
  const path = join(config.dataDir, AGENT_KEY_FILE);
  let text: string;
  try {
    text = await readOrCreate(path, async () => ed25519.format(await ed25519.generate()));
  } catch (err) {
    if (err instanceof StateFileError) throw new ConfigError([`MEDIAPLANE_DATA_DIR: ${err.message}`]);
    throw err;
  }
  try {
    return ed25519.parse(text);
  } catch {
    throw new ConfigError([
      `MEDIAPLANE_DATA_DIR: ${path} does not hold an Ed25519 agent key; remove it to generate a new identity (delegations to the old one stop working)`,
    ]);
  }
}
