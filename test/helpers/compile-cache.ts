import { tmpdir } from 'node:os';
import { join } from 'node:path';

// Every `mediaplane` process a test spawns (the CLI, `mediaplane start`) strips the types of
// and compiles the whole source tree before it does anything: about 2 s of CPU each on the
// 2-core CI host, half of which Node's module compile cache saves from the second run on
// (https://nodejs.org/api/module.html#module-compile-cache). Entries are keyed by the source's
// checksum and the Node version, so a shared folder never serves stale code. Kept when the
// runner or the caller already chose one.

/** The environment that turns the cache on, for spawn's `env`. */
export const COMPILE_CACHE_ENV: Readonly<Record<string, string>> = {
  NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE ?? join(tmpdir(), 'mediaplane-test-compile-cache'),
};
