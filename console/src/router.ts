// Hash routing: `#/assets/ID` is ['assets', 'ID']. The server serves one index.html at `/`,
// so a reload or a shared link lands on the same page without a server route per page.

import { useEffect, useState } from 'preact/hooks';

/** What every page component takes (pages/index.ts lists them). */
export interface PageProps {
  /** The hash route after the page's own segment: `#/tasks/ID` gives the tasks page ['ID']. */
  route: string[];
}

export function parseHash(hash: string): string[] {
  return hash
    .replace(/^#\/?/, '')
    .split('/')
    .filter(Boolean)
    .map((s) => decodeURIComponent(s));
}

/** The link to a page: href('assets', id) is `#/assets/<id>`. */
export function href(...segments: string[]): string {
  return `#/${segments.map(encodeURIComponent).join('/')}`;
}

export function navigate(...segments: string[]): void {
  location.hash = href(...segments);
}

/** The current route's segments, updated on every hash change. */
export function useRoute(): string[] {
  const [route, setRoute] = useState(() => parseHash(location.hash));
  useEffect(() => {
    const on = () => setRoute(parseHash(location.hash));
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}
