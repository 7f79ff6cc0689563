// Webhooks: the list (GET /api/webhook, Link paging) with a form to create one
// (POST /api/webhook); `#/webhooks/ID` is one webhook: edit (PUT), delete (after a
// confirmation), its delivery log and resend (webhook-detail.tsx).

import { useState } from 'preact/hooks';
import { api, apiRaw, nextLink } from '../api.ts';
import { Button, ErrorText } from '../components/index.ts';
import { dateTime } from '../format.ts';
import { useLoad } from '../hooks.ts';
import { href, type PageProps } from '../router.ts';
import { WebhookDetail } from './webhook-detail.tsx';
import type { Webhook, WebhookBody } from '../wire.ts';
import { WebhookForm } from './webhook-form.tsx';

/** `#/webhooks` lists them, `#/webhooks/ID` shows one. */
export function WebhooksPage({ route }: PageProps) {
  return route[0] ? <WebhookDetail id={route[0]} /> : <WebhookList />;
}

/** The last outcome in words: when it last fired, and the last failure (it stays after later successes). */
export function lastOutcome(w: Webhook): string {
  const s = w.status;
  if (!s.lastTriggeredAt) return 'never triggered';
  const f = s.lastFailure;
  const failure = f ? `; last failure ${dateTime(f.timestamp)}: ${f.statusCode ?? f.error ?? 'failed'}` : '';
  return `last sent ${dateTime(s.lastTriggeredAt)}${failure}`;
}

function WebhookRows({ hooks }: { hooks: Webhook[] }) {
  return (
    <table class="webhook-table">
      <thead>
        <tr>
          <th scope="col">Name</th>
          <th scope="col">URL</th>
          <th scope="col">Events</th>
          <th scope="col">Last delivery</th>
        </tr>
      </thead>
      <tbody>
        {hooks.map((w) => (
          <tr key={w.id}>
            <td data-label="Name">
              <a href={href('webhooks', w.id)}>{w.name}</a>
            </td>
            <td data-label="URL" class="wrap">
              {w.url}
            </td>
            <td data-label="Events">{w.events.join(', ')}</td>
            <td data-label="Last delivery">{lastOutcome(w)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function WebhookList() {
  const [more, setMore] = useState<Webhook[]>([]);
  const [next, setNext] = useState<string | undefined>(undefined);
  const [created, setCreated] = useState<Webhook | undefined>(undefined);
  const [moreError, setMoreError] = useState<unknown>(undefined);
  const list = useLoad(async () => {
    const res = await apiRaw('GET', '/api/webhook?limit=20');
    setMore([]);
    setNext(nextLink(res));
    return (await res.json()) as Webhook[];
  }, []);
  const loadMore = async () => {
    if (!next) return;
    try {
      const res = await apiRaw('GET', next);
      const page = (await res.json()) as Webhook[];
      setMore((p) => [...p, ...page]);
      setNext(nextLink(res));
      setMoreError(undefined);
    } catch (e) {
      setMoreError(e);
    }
  };
  const create = async (body: WebhookBody) => {
    const w = await api<Webhook>('POST', '/api/webhook', body);
    setCreated(w);
    await list.reload();
  };
  const hooks = [...(list.data ?? []), ...more];
  return (
    <section>
      <h1>Webhooks</h1>
      <p class="hint">URLs of yours that get a POST when a task, an asset or a stream of this key's owner changes.</p>
      <ErrorText error={list.error} />
      {list.loading && !list.data && <p role="status">Loading…</p>}
      {list.data && hooks.length === 0 && <p>No webhooks yet.</p>}
      {hooks.length > 0 && <WebhookRows hooks={hooks} />}
      <ErrorText error={moreError} />
      {next && <Button onClick={loadMore}>Load more</Button>}
      <section aria-labelledby="new-webhook" class="card">
        <h2 id="new-webhook">New webhook</h2>
        <WebhookForm submitLabel="Create webhook" onSubmit={create} />
        <p role="status" class="ok">
          {created && (
            <>
              Created <a href={href('webhooks', created.id)}>{created.name}</a>.
            </>
          )}
        </p>
      </section>
    </section>
  );
}
