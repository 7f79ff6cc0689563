import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as ed25519 from '@ucanto/principal/ed25519';
import type { Config } from '../../config/index.ts';
import { ConfigError } from '../../config/index.ts';

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
      throw new ConfigError(['MEDIAPLANE_DWEB_AGENT_KEY: is not an Ed25519 private key in the Storacha format (base64pad multibase, starting with "M")']);
    }
  }
  const path = join(config.dataDir, AGENT_KEY_FILE);
  const existing = await readKeyFile(path);
  if (existing) return existing;
  await mkdir(config.dataDir, { recursive: true });
  const fresh = await ed25519.generate();
  try {
    // `wx`: when two processes start together, the first key written wins and both use it.
    await writeFile(path, `${ed25519.format(fresh)}\n`, { flag: 'wx', mode: 0o600 });
    return fresh;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    const winner = await readKeyFile(path);
    if (!winner) throw new ConfigError([`MEDIAPLANE_DATA_DIR: ${path} is empty or unreadable`]);
    return winner;
  }
}

async function readKeyFile(path: string): Promise<AgentSigner | undefined> {
  let text: string;
  try {
    text = (await readFile(path, 'utf8')).trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  if (text === '') return undefined;
  try {
    return ed25519.parse(text);
  } catch {
    throw new ConfigError([`MEDIAPLANE_DATA_DIR: ${path} does not hold an Ed25519 agent key; remove it to generate a new identity (delegations to the old one stop working)`]);
  }
}
