// The console's pages, in nav order. CONVENTIONS for whoever adds a page:
//
// - One file per page in console/src/pages/<name>.tsx (its parts beside it, named
//   <name>-*.tsx), exporting a component that takes `PageProps` (from '../router.ts'): `route`
//   is the hash route after the page's own segment (`#/tasks/ID` gives the tasks page ['ID']).
//   A page imports no other page's files, nor this list: what two pages share goes to
//   '../widgets/' (parts that load their own data) or '../components/'
//   (console/.dependency-cruiser.cjs checks it). Link with `href('tasks', id)` and move with `navigate(...)` from
//   '../router.ts'; never touch location.pathname (the server serves only `/`).
// - Add one line to `pages` below: {id, title, Component}. `id` is the first hash segment;
//   `nav: false` keeps a page out of the nav.
// - Call the API only through '../api.ts': `api<T>(method, path, body?)` (JSON; throws
//   `ApiError {status, messages}` with the API's own words), `apiRaw(...)` when headers
//   matter (Link paging via `nextLink(res)`, cost headers), `sse(path, onEvent, {method,
//   body, signal})` for event streams (task events, chat with stream: true). Only public
//   routes: the console is a client like any other.
// - UI parts from '../components/index.ts': Button (type="button" by default; variant
//   primary|secondary|danger; busy), Field (label + control + error: give the control the
//   same id, from preact's `useId()`), ErrorText (shows an error's words, role="alert"),
//   Progress (0..1), Json (a "Show JSON" toggle: no raw JSON unless asked), CopyButton,
//   PhaseBadge (a task's or an asset's phase, its tone from '../phases.ts'), Player.
// - The API's shapes from '../wire.ts' (the contract's types): never a copy of your own.
//   Hooks in '../hooks.ts': useLoad(fn, deps) -> {data, error, loading, reload},
//   useInterval(fn, ms, active). Formatting in '../format.ts': bytes, duration, dateTime.
// - Each page starts with one <h1> (focus moves to it on navigation: keep it first).
//   Every control has a visible label or aria-label; errors sit next to what caused them.
// - Styles: add classes to console/src/style.css in a section headed with the page's name;
//   use the CSS variables at its top; layouts must read at 360 px wide.
// - Heavy libraries (hls.js) are imported lazily with `await import(...)`: the first load
//   stays under 500 KB compressed, script and style together.

import { type FunctionComponent, h } from 'preact';
import type { PageProps } from '../router.ts';
import { AssetPage, AssetsPage } from './assets.tsx';
import { ChatPage } from './chat.tsx';
import { StreamsPage } from './streams.tsx';
import { TasksPage } from './tasks.tsx';
import { UploadPage } from './upload.tsx';
import { WebhooksPage } from './webhooks.tsx';

export interface PageDef {
  id: string;
  title: string;
  Component: FunctionComponent<PageProps>;
  nav?: boolean;
}

/** `#/assets` is the list, `#/assets/ID` one asset. */
function Assets({ route }: PageProps) {
  return route[0] ? h(AssetPage, { id: route[0] }) : h(AssetsPage, {});
}

export const pages: PageDef[] = [
  { id: 'upload', title: 'Upload', Component: UploadPage },
  { id: 'assets', title: 'Assets', Component: Assets },
  { id: 'streams', title: 'Streams', Component: StreamsPage },
  { id: 'tasks', title: 'Tasks', Component: TasksPage },
  { id: 'webhooks', title: 'Webhooks', Component: WebhooksPage },
  { id: 'chat', title: 'Chat', Component: ChatPage },
];

/** Where `#/` goes. */
export const HOME = 'assets';
