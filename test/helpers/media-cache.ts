import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { rename } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

// Generated inputs (ffmpeg's lavfi sources) made once per run and shared by the files that
// ask for the same one (the chunked acceptance's 180 s input took a minute of the
// serial turn). scripts/test.ts makes the folder and removes it at the end; a file run on its
// own keeps its inputs in a folder of its own for the length of its process.

/** Set by scripts/test.ts: the run's folder of generated inputs. */
export const MEDIA_CACHE_ENV = 'MEDIAPLANE_TEST_MEDIA_CACHE';

let own: string | undefined;

function cacheDir(): string {
  const given = process.env[MEDIA_CACHE_ENV];
  if (given) {
    mkdirSync(given, { recursive: true });
    return given;
  }
  if (!own) {
    const dir = mkdtempSync(path.join(tmpdir(), 'mediaplane-test-media-'));
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    own = dir;
  }
  return own;
}

const making = new Map<string, Promise<string>>();

/**
 * The cached file `name` (a name that spells every generation parameter), made by `make` into
 * the temporary path it is given when absent. Files of the same run may ask at once: each
 * writes its own temporary file and renames it into place, and rename is atomic.
 */
export function cachedMedia(name: string, make: (tmp: string) => Promise<void>): Promise<string> {
  const file = path.join(cacheDir(), name);
  const pending = making.get(file);
  if (pending) return pending;
  if (existsSync(file)) return Promise.resolve(file);
  const made = (async () => {
    const tmp = `${file}.${process.pid}.tmp${path.extname(name)}`;
    try {
      await make(tmp);
      await rename(tmp, file);
      return file;
    } finally {
      making.delete(file);
      rmSync(tmp, { force: true });
    }
  })();
  making.set(file, made);
  return made;
}
