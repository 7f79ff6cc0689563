// A webhook's delivery log (GET /api/webhook/{id}/log, newest first, Link paging) and resend
// (POST .../log/{logId}/resend: the new attempt, or a 429 whose words and Retry-After show
// next to that row's button). The first page is read again every 5 s while the tab shows it.

import { useEffect, useState } from 'preact/hooks';
import { apiRaw, nextLink } from '../api.ts';
import { fetchDetailed, withRetryAfter } from '../api-detail.ts';
import { Button, ErrorText, Json } from '../components/index.ts';
import { dateTime } from '../format.ts';
import { useInterval } from '../hooks.ts';
import type { DeliveryLog } from '../wire.ts';

const REFRESH_MS = 5000;

function outcome(l: DeliveryLog): string {
  if (l.response.status !== undefined) return `${l.response.status} ${l.response.statusText ?? ''}`.trim();
  return l.error ?? 'no answer';
}

function ResendButton({ log, onSent }: { log: DeliveryLog; onSent: (l: DeliveryLog) => void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [sent, setSent] = useState<string>('');
  const errorId = `resend-${log.id}-error`;
  const resend = async () => {
    setBusy(true);
    setError(undefined);
    setSent('');
    try {
      const path = `/api/webhook/${encodeURIComponent(log.webhookId)}/log/${encodeURIComponent(log.id)}/resend`;
      const again = (await (await fetchDetailed('POST', path)).json()) as DeliveryLog;
      setSent(`Sent again: ${outcome(again)}`);
      onSent(again);
    } catch (e) {
      setError(withRetryAfter(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="resend">
      <Button
        onClick={resend}
        busy={busy}
        aria-label={`Resend ${log.event} of ${dateTime(log.createdAt)}`}
        aria-describedby={error ? errorId : undefined}
      >
        Resend
      </Button>
      <span role="status" class="hint">
        {sent}
      </span>
      <ErrorText error={error} id={errorId} />
    </div>
  );
}

function LogRow({ log, onSent }: { log: DeliveryLog; onSent: (l: DeliveryLog) => void }) {
  return (
    <tr>
      <td data-label="Time">{dateTime(log.createdAt)}</td>
      <td data-label="Event">{log.event}</td>
      <td data-label="Status">
        <span class={log.success ? 'ok' : 'error'}>{outcome(log)}</span>
      </td>
      <td data-label="Duration">{Math.round(log.duration * 1000)} ms</td>
      <td data-label="Actions">
        <ResendButton log={log} onSent={onSent} />
        <Json value={{ request: log.request, response: log.response }} label="request and response" />
      </td>
    </tr>
  );
}

function useDeliveryLog(webhookId: string) {
  const first = `/api/webhook/${encodeURIComponent(webhookId)}/log?limit=20`;
  const [logs, setLogs] = useState<DeliveryLog[]>([]);
  const [next, setNext] = useState<string | undefined>(undefined);
  const [pages, setPages] = useState(1);
  const [error, setError] = useState<unknown>(undefined);
  const [loading, setLoading] = useState(true);
  // A quiet read (the timer's) never marks the buttons busy: a disabled button would drop the focus.
  const read = async (path: string, append: boolean, quiet = false) => {
    if (!quiet) setLoading(true);
    try {
      const res = await apiRaw('GET', path);
      const page = (await res.json()) as DeliveryLog[];
      setLogs((p) => (append ? [...p, ...page.filter((l) => !p.some((x) => x.id === l.id))] : page));
      setNext(nextLink(res));
      setError(undefined);
    } catch (e) {
      setError(e);
    } finally {
      setLoading(false);
    }
  };
  useEffect(() => {
    void read(first, false);
  }, [webhookId]);
  // Only while the first page is all that is shown: a refresh would drop the older pages.
  useInterval(() => document.visibilityState === 'visible' && void read(first, false, true), REFRESH_MS, pages === 1);
  return {
    logs,
    next,
    error,
    loading,
    refresh: () => {
      setPages(1);
      return read(first, false);
    },
    more: () => {
      if (!next) return;
      setPages((n) => n + 1);
      return read(next, true);
    },
    prepend: (l: DeliveryLog) => setLogs((p) => [l, ...p]),
  };
}

export function DeliveryLogView({ webhookId }: { webhookId: string }) {
  const log = useDeliveryLog(webhookId);
  return (
    <section aria-labelledby="delivery-log">
      <h2 id="delivery-log">Delivery log</h2>
      <p class="hint">Every attempt, newest first. The newest page refreshes every 5 seconds.</p>
      <ErrorText error={log.error} />
      {log.logs.length === 0 && !log.loading && !log.error && (
        <p>No deliveries yet: they come when a task or asset event this webhook listens for happens.</p>
      )}
      {log.logs.length > 0 && (
        <table class="log-table">
          <thead>
            <tr>
              <th scope="col">Time</th>
              <th scope="col">Event</th>
              <th scope="col">Status</th>
              <th scope="col">Duration</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {log.logs.map((l) => (
              <LogRow key={l.id} log={l} onSent={log.prepend} />
            ))}
          </tbody>
        </table>
      )}
      <div class="row">
        {log.next && <Button onClick={log.more}>Load older</Button>}
        <Button onClick={log.refresh}>Refresh</Button>
      </div>
    </section>
  );
}
