// One webhook: what it is, its edit form (PATCH: what the form leaves out, the secret above all,
// stays as it is; Livepeer's PUT would remove a secret not sent again), delete after
// an inline confirmation (no window.confirm: a question in the page is keyboard and screen
// reader friendly), and its delivery log with resend.

import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { ConfirmDelete, ErrorText } from '../components/index.ts';
import { dateTime } from '../format.ts';
import { useLoad } from '../hooks.ts';
import { href, navigate } from '../router.ts';
import { DeliveryLogView } from './webhook-log.tsx';
import type { Webhook, WebhookBody } from '../wire.ts';
import { WebhookForm } from './webhook-form.tsx';

function Summary({ hook }: { hook: Webhook }) {
  const f = hook.status.lastFailure;
  return (
    <dl class="props">
      <dt>URL</dt>
      <dd>{hook.url}</dd>
      <dt>Events</dt>
      <dd>{hook.events.join(', ')}</dd>
      <dt>Signed</dt>
      <dd>{hook.signed ? 'yes: deliveries carry Livepeer-Signature' : 'no'}</dd>
      <dt>Created</dt>
      <dd>{dateTime(hook.createdAt)}</dd>
      <dt>Last sent</dt>
      <dd>{hook.status.lastTriggeredAt ? dateTime(hook.status.lastTriggeredAt) : 'never'}</dd>
      {f && (
        <>
          <dt>Last failure</dt>
          <dd>
            {dateTime(f.timestamp)}: {[f.statusCode, f.error].filter((x) => x !== undefined).join(' ') || 'failed'}
            {f.response ? <div class="hint wrap">{f.response}</div> : null}
          </dd>
        </>
      )}
    </dl>
  );
}

function DeleteWebhook({ hook }: { hook: Webhook }) {
  const remove = async () => {
    await api('DELETE', `/api/webhook/${encodeURIComponent(hook.id)}`);
    navigate('webhooks');
  };
  return (
    <section aria-labelledby="delete-webhook">
      <h2 id="delete-webhook">Delete</h2>
      <ConfirmDelete
        label="Delete webhook"
        question={<>Delete “{hook.name}”? Its deliveries not yet made are given up. This cannot be undone.</>}
        remove={remove}
      />
    </section>
  );
}

export function WebhookDetail({ id }: { id: string }) {
  const loaded = useLoad(() => api<Webhook>('GET', `/api/webhook/${encodeURIComponent(id)}`), [id]);
  const [saved, setSaved] = useState('');
  const hook = loaded.data;
  const save = async (body: WebhookBody) => {
    setSaved('');
    await api<Webhook>('PATCH', `/api/webhook/${encodeURIComponent(id)}`, body);
    await loaded.reload();
    setSaved(`Saved at ${new Date().toLocaleTimeString()}.`);
  };
  return (
    <section>
      <h1>Webhook{hook ? `: ${hook.name}` : ''}</h1>
      <p>
        <a href={href('webhooks')}>All webhooks</a>
      </p>
      <ErrorText error={loaded.error} />
      {!hook && loaded.loading && <p role="status">Loading…</p>}
      {hook && (
        <>
          <div class="card">
            <Summary hook={hook} />
          </div>
          <section aria-labelledby="edit-webhook" class="card">
            <h2 id="edit-webhook">Edit</h2>
            <WebhookForm key={hook.updatedAt} initial={hook} submitLabel="Save changes" onSubmit={save} />
            <p role="status" class="ok">
              {saved}
            </p>
          </section>
          <DeliveryLogView webhookId={hook.id} />
          <DeleteWebhook hook={hook} />
        </>
      )}
    </section>
  );
}
