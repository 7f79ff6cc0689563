// The names of the assets tasks make or read, for the Tasks pages: one GET /api/asset (the
// newest 100) for a list, GET /api/asset/{id} for the one or two of a task's page. Kept for
// the page load; an id asked once and not found (a deleted asset) is not asked again.

import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.ts';
import type { Asset } from '../wire.ts';

const names = new Map<string, string>();
const asked = new Set<string>();
let listed: Promise<void> | undefined;

function keep(assets: Asset[]): void {
  for (const a of assets) names.set(a.id, a.name);
}

async function find(ids: string[], each: boolean): Promise<void> {
  const missing = ids.filter((id) => !names.has(id) && !asked.has(id));
  if (missing.length === 0) return;
  if (each) {
    await Promise.all(
      missing.map((id) =>
        api<Asset>('GET', `/api/asset/${encodeURIComponent(id)}`)
          .then((a) => keep([a]))
          .catch(() => undefined),
      ),
    );
  } else {
    listed ??= api<Asset[]>('GET', '/api/asset?limit=100')
      .then(keep)
      .catch(() => undefined)
      .finally(() => {
        listed = undefined;
      });
    await listed;
  }
  for (const id of missing) asked.add(id);
}

/** Asset names by id for `ids`, filled in as they are read. `each`: read each asset on its own. */
export function useAssetNames(ids: (string | undefined)[], each = false): ReadonlyMap<string, string> {
  const wanted = [...new Set(ids.filter((id): id is string => Boolean(id)))];
  const key = wanted.join(',');
  const [, setVersion] = useState(0);
  useEffect(() => {
    let gone = false;
    void find(wanted, each).then(() => {
      if (!gone) setVersion((v) => v + 1);
    });
    return () => {
      gone = true;
    };
  }, [key]);
  return names;
}
