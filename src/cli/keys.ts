import { Accounts } from '../accounts/index.ts';
import type { Queryable } from '../db/index.ts';
import { UsageError, type CommandFlags, type ParsedArgs } from './args.ts';

export const KEYS_HELP = `Usage:
  mediaplane keys create --owner NAME   create a key; printed once, on a line of its own
  mediaplane keys list [--owner NAME]   list keys (id, owner, prefix, created, revoked)
  mediaplane keys revoke KEY_ID         revoke a key by its id

Keys are stored only as a hash. These commands work whether or not the server is running.`;

export const KEYS_FLAGS: CommandFlags = { owner: { type: 'string' }, json: { type: 'boolean' } };

export async function keysCommand(args: ParsedArgs, db: Queryable): Promise<number> {
  const accounts = new Accounts(db);
  const [sub, ...rest] = args.positionals;
  const owner = typeof args.flags.owner === 'string' ? args.flags.owner : undefined;
  switch (sub) {
    case 'create': {
      if (!owner) throw new UsageError('keys create needs --owner NAME');
      const k = await accounts.createKey(owner);
      process.stderr.write(
        `created key ${k.id} for owner ${k.owner} (project ${k.projectId}); it is shown only once:\n`,
      );
      process.stdout.write(`${k.key}\n`);
      return 0;
    }
    case 'list': {
      const keys = await accounts.listKeys(owner);
      if (args.flags.json === true) process.stdout.write(`${JSON.stringify(keys)}\n`);
      else
        for (const k of keys)
          process.stdout.write(
            `${k.id}  ${k.owner}  ${k.prefix}…  created ${new Date(k.createdAt).toISOString()}${k.revokedAt ? `  revoked ${new Date(k.revokedAt).toISOString()}` : ''}\n`,
          );
      return 0;
    }
    case 'revoke': {
      const id = rest[0];
      if (!id) throw new UsageError('keys revoke needs the key id (see keys list)');
      if (!(await accounts.revokeKey(id))) {
        process.stderr.write(`no live key with id ${id}\n`);
        return 1;
      }
      process.stderr.write(`revoked ${id}\n`);
      return 0;
    }
    default:
      throw new UsageError(`keys needs create, list or revoke\n\n${KEYS_HELP}`);
  }
}
