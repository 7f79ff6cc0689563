import type { Config } from '../config/index.ts';
import { agentDid } from '../storage/dweb/index.ts';

// `mediaplane agent did`: prints the did:key users delegate their Storacha space to
// (issue 5), creating the agent key in the data directory on first use.

const USAGE =
  'usage: ./mediaplane agent did\n  prints the service agent DID to delegate a Storacha space to, e.g.\n  storacha delegation create <did> -c space/blob/add -c space/index/add -c upload/add -c filecoin/offer --base64';

export async function runAgentCommand(
  argv: string[],
  deps: { config: Config; out?: (line: string) => void; err?: (line: string) => void },
): Promise<number> {
  const out = deps.out ?? ((l: string) => process.stdout.write(`${l}\n`));
  const err = deps.err ?? ((l: string) => process.stderr.write(`${l}\n`));
  const [sub, ...rest] = argv;
  if (sub === 'did' && rest.length === 0) {
    out(await agentDid(deps.config));
    return 0;
  }
  if (sub === undefined || sub === '--help' || sub === '-h' || sub === 'help') {
    out(USAGE);
    return sub === undefined ? 2 : 0;
  }
  err(`mediaplane agent: unknown command "${[sub, ...rest].join(' ')}"\n${USAGE}`);
  return 2;
}
