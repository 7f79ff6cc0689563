import { chmod, mkdir, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { MediaplaneError } from './errors.ts';

// A directory only this service's user may enter (issue #25, hole 3). The data dir holds
// the embedded database, whose WAL carries webhook secrets and tasks' S3 keys, and PGlite
// writes its files 0666 whatever the umask: the folder is the only guard there is. So it is
// created 0700, and one that others can enter is made 0700 before anything is written in it.

const PRIVATE = 0o700;
/** Permission bits of the group and of everyone else. */
const OTHERS = 0o077;

/** A directory other local users can enter that cannot be made private. */
export class DirNotPrivateError extends MediaplaneError {
  readonly code = 'dir_not_private';
  readonly statusCode = 500;
}

const octal = (mode: number) => (mode & 0o7777).toString(8).padStart(4, '0');

/**
 * Creates `path` mode 0700 (its missing parents as usual), or makes an existing one 0700
 * when the group or others have any permission on it, calling `warn` with a line naming it.
 * Throws DirNotPrivateError, naming it, when it cannot: another user owns it, it is a shared
 * directory (sticky bit, as /tmp: chmod there would lock every other user out), or chmod fails.
 */
export async function ensurePrivateDir(path: string, warn: (message: string) => void = () => {}): Promise<void> {
  if (await createPrivate(path)) return;
  const st = await stat(path);
  if (!st.isDirectory()) throw new DirNotPrivateError(`${path} is not a directory`);
  if ((st.mode & OTHERS) === 0) return;
  const open = `${path} is open to other local users (mode ${octal(st.mode)})`;
  const fix = `make it private (chmod 700 ${path}) or choose a directory of its own`;
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid)
    throw new DirNotPrivateError(`${open} and belongs to uid ${st.uid}, not to this process (uid ${uid}): ${fix}`);
  if (st.mode & 0o1000) throw new DirNotPrivateError(`${open} and is a shared directory (sticky bit): ${fix}`);
  try {
    await chmod(path, PRIVATE);
  } catch (err) {
    throw new DirNotPrivateError(`${open} and could not be made private: ${fix}`, { cause: err });
  }
  warn(`${open}; made it private (0700): it holds the database and the service's secrets`);
}

/** Creates `path` 0700; false when it is there already. */
async function createPrivate(path: string): Promise<boolean> {
  await mkdir(dirname(path), { recursive: true });
  try {
    await mkdir(path, { mode: PRIVATE });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
  // The umask only takes bits away; this gives the owner all three whatever it is.
  await chmod(path, PRIVATE);
  return true;
}
