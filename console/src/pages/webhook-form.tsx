// The webhook form, for POST /api/webhook and PATCH /api/webhook/{id}: name, url, the events
// (task.*, asset.* and stream.*, spec/API.md) and the shared secret. An edit sends the secret only when
// it changes: the API never shows it, so an empty field keeps it (PATCH leaves out what it is
// not given; PUT, as Livepeer's, would remove it), and stopping the signing is a checkbox of
// its own (`sharedSecret: null`). A 422's messages name the field (`url: must start with ...`),
// so each sits under its field; the rest by the submit button.

import { useId, useState } from 'preact/hooks';
import { ASSET_EVENT_NAMES } from '../../../src/assets/event-names.ts';
import { STREAM_EVENT_NAMES } from '../../../src/live/event-names.ts';
import { TASK_EVENT_NAMES } from '../../../src/tasks/event-names.ts';
import { ApiError } from '../api.ts';
import { Button, describedBy, ErrorText, Field } from '../components/index.ts';
import { everyOf } from '../every-of.ts';
import type { Webhook, WebhookBody, WebhookEvent } from '../wire.ts';

/**
 * The events a webhook may subscribe to, in the form's two groups: the domains' registries of
 * event names, which the contract's list is made of (a difference is a type error here).
 */
const EVENTS = everyOf<WebhookEvent>()([...TASK_EVENT_NAMES, ...ASSET_EVENT_NAMES, ...STREAM_EVENT_NAMES]);
const TASK_EVENTS: readonly WebhookEvent[] = TASK_EVENT_NAMES;
const ASSET_EVENTS: readonly WebhookEvent[] = ASSET_EVENT_NAMES;
const STREAM_EVENTS: readonly WebhookEvent[] = STREAM_EVENT_NAMES;
const isEvent = (e: string): e is WebhookEvent => (EVENTS as readonly string[]).includes(e);

type FieldName = 'name' | 'url' | 'events' | 'sharedSecret' | 'form';

/** The API's messages sorted by the field they name (their `field:` or `field[i]:` prefix). */
export function errorsByField(error: unknown): Partial<Record<FieldName, ApiError>> {
  if (!(error instanceof ApiError)) return error === undefined ? {} : { form: error as ApiError };
  const out: Partial<Record<FieldName, string[]>> = {};
  for (const m of error.messages) {
    const field = /^(?:body\.)?(name|url|events|sharedSecret)\b/.exec(m)?.[1] as FieldName | undefined;
    const key = field ?? 'form';
    out[key] = [...(out[key] ?? []), m];
  }
  const result: Partial<Record<FieldName, ApiError>> = {};
  for (const [k, v] of Object.entries(out)) result[k as FieldName] = new ApiError(error.status, v);
  return result;
}

function EventBoxes(props: {
  group: string;
  events: readonly WebhookEvent[];
  chosen: WebhookEvent[];
  toggle: (e: WebhookEvent) => void;
}) {
  const base = useId();
  return (
    <div class="event-group">
      <div class="hint">{props.group}</div>
      {props.events.map((e) => (
        <div class="field-inline event-box" key={e}>
          <input
            id={`${base}-${e}`}
            type="checkbox"
            checked={props.chosen.includes(e)}
            onChange={() => props.toggle(e)}
          />
          <label for={`${base}-${e}`}>{e}</label>
        </div>
      ))}
    </div>
  );
}

/** The form's fields and its submission; errors sorted by the field they name. */
function useWebhookForm(initial: Webhook | undefined, onSubmit: (body: WebhookBody) => Promise<void>) {
  const [name, setName] = useState(initial?.name ?? '');
  const [url, setUrl] = useState(initial?.url ?? '');
  const [events, setEvents] = useState<WebhookEvent[]>(
    initial ? initial.events.filter(isEvent) : ['task.completed', 'task.failed'],
  );
  const [secret, setSecret] = useState('');
  const [unsign, setUnsign] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const toggle = (e: WebhookEvent) => setEvents((p) => (p.includes(e) ? p.filter((x) => x !== e) : [...p, e]));
  const submit = async (ev: Event) => {
    ev.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      await onSubmit({ name, url, events, ...secretOf(secret, unsign) });
      if (!initial) {
        setName('');
        setUrl('');
      }
      setSecret('');
      setUnsign(false);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const values = { name, url, events, secret, unsign };
  return { values, setName, setUrl, setSecret, setUnsign, toggle, submit, busy, errors: errorsByField(error) };
}

/** The secret as the body carries it: a new one, null to stop signing, or nothing (kept as it is). */
function secretOf(secret: string, unsign: boolean): Pick<WebhookBody, 'sharedSecret'> {
  if (unsign) return { sharedSecret: null };
  return secret ? { sharedSecret: secret } : {};
}

/** What the secret field says: whether deliveries are signed now, and what an empty field does. */
function secretHint(initial: Webhook | undefined, unsign: boolean): string {
  if (!initial) return 'Optional. Signs every delivery (Livepeer-Signature); never shown again.';
  if (unsign) return 'Deliveries go unsigned once saved.';
  if (initial.signed)
    return 'Deliveries are signed. Leave empty to keep the current secret (never shown); type a new one to replace it.';
  return 'Deliveries are unsigned. Type a secret to sign them (Livepeer-Signature); never shown again.';
}

/** For a webhook that signs: the explicit way to stop (the API's `sharedSecret: null`). */
function StopSigning(props: { checked: boolean; onChange: (checked: boolean) => void }) {
  const id = useId();
  return (
    <Field id={id} label="Stop signing deliveries (remove the secret)" inline>
      <input
        id={id}
        type="checkbox"
        checked={props.checked}
        onChange={(e) => props.onChange(e.currentTarget.checked)}
      />
    </Field>
  );
}

export function WebhookForm(props: {
  initial?: Webhook;
  submitLabel: string;
  onSubmit: (body: WebhookBody) => Promise<void>;
}) {
  const ids = { name: useId(), url: useId(), secret: useId(), events: useId(), form: useId() };
  const f = useWebhookForm(props.initial, props.onSubmit);
  const { errors } = f;
  const { name, url, events, secret, unsign } = f.values;
  return (
    <form onSubmit={f.submit} class="webhook-form" noValidate>
      <Field id={ids.name} label="Name" error={errors.name}>
        <input
          id={ids.name}
          value={name}
          onInput={(e) => f.setName(e.currentTarget.value)}
          aria-invalid={errors.name ? true : undefined}
          aria-describedby={describedBy(ids.name, { error: errors.name })}
        />
      </Field>
      <Field id={ids.url} label="URL" error={errors.url} hint="Where events are POSTed: http:// or https://">
        <input
          id={ids.url}
          type="url"
          inputMode="url"
          value={url}
          onInput={(e) => f.setUrl(e.currentTarget.value)}
          aria-invalid={errors.url ? true : undefined}
          aria-describedby={describedBy(ids.url, { error: errors.url, hint: true })}
        />
      </Field>
      <fieldset class="events" aria-describedby={errors.events ? `${ids.events}-error` : undefined}>
        <legend>Events</legend>
        <EventBoxes group="Tasks" events={TASK_EVENTS} chosen={events} toggle={f.toggle} />
        <EventBoxes group="Assets" events={ASSET_EVENTS} chosen={events} toggle={f.toggle} />
        <EventBoxes group="Streams" events={STREAM_EVENTS} chosen={events} toggle={f.toggle} />
        <ErrorText error={errors.events} id={`${ids.events}-error`} />
      </fieldset>
      <Field id={ids.secret} label="Shared secret" error={errors.sharedSecret} hint={secretHint(props.initial, unsign)}>
        <input
          id={ids.secret}
          type="password"
          autocomplete="new-password"
          value={unsign ? '' : secret}
          disabled={unsign}
          onInput={(e) => f.setSecret(e.currentTarget.value)}
          aria-invalid={errors.sharedSecret ? true : undefined}
          aria-describedby={describedBy(ids.secret, { error: errors.sharedSecret, hint: true })}
        />
      </Field>
      {props.initial?.signed && <StopSigning checked={unsign} onChange={f.setUnsign} />}
      <div class="row">
        <Button
          type="submit"
          variant="primary"
          busy={f.busy}
          aria-describedby={errors.form ? `${ids.form}-error` : undefined}
        >
          {props.submitLabel}
        </Button>
      </div>
      <ErrorText error={errors.form} id={`${ids.form}-error`} />
    </form>
  );
}
