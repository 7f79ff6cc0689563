// What this server is set up to do (GET /api/capabilities): features that need server
// settings (C2PA signing, IPFS exports to the server's space) are offered only when enabled,
// and explained with the settings' names when not. Read once per page load: settings change
// only with a restart. A failed read is not kept, so the next page asks again.

import { useEffect, useState } from 'preact/hooks';
import { api } from './api.ts';
import type { Capabilities } from './wire.ts';

let cached: Promise<Capabilities> | undefined;

export function capabilities(): Promise<Capabilities> {
  if (!cached) {
    const read = api<Capabilities>('GET', '/api/capabilities');
    cached = read;
    read.catch(() => {
      if (cached === read) cached = undefined;
    });
  }
  return cached;
}

/** The server's capabilities once read; undefined while loading or when the read failed. */
export function useCapabilities(): Capabilities | undefined {
  const [caps, setCaps] = useState<Capabilities | undefined>(undefined);
  useEffect(() => {
    let gone = false;
    capabilities()
      .then((c) => {
        if (!gone) setCaps(c);
      })
      .catch(() => undefined);
    return () => {
      gone = true;
    };
  }, []);
  return caps;
}
