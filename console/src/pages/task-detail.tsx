// One task: its state, params (as the API shows them: secrets already redacted), error words,
// retries, output, and an event timeline drawn from GET /api/task/{id}/events while that
// stream is open (the stream ends when the task does; a retry opens it again). Cancel and
// retry answer with the task, or with the API's words next to the button.

import { useEffect, useState } from 'preact/hooks';
import { api, errorWords, type SseEvent, sse } from '../api.ts';
import { Button, ErrorText, errorMessages, Json } from '../components/index.ts';
import { ValueList } from '../components/ValueList.tsx';
import { dateTime } from '../format.ts';
import { useInterval, useLoad } from '../hooks.ts';
import { href } from '../router.ts';
import { canCancel, canRetry, isActive, PhaseBadge, type Task, TaskState } from './task-parts.tsx';

interface TimelineEntry {
  at: number;
  text: string;
  error?: boolean;
}

function describe(t: Task): string {
  const s = t.status;
  const parts = [s.phase];
  if (s.progress !== undefined && s.phase === 'running') parts.push(`${Math.round(s.progress * 100)}%`);
  if (s.retries) parts.push(`retries ${s.retries}`);
  if (s.errorMessage) parts.push(`: ${s.errorMessage}`);
  return parts.join(' ');
}

/** Error words of an `event: error` in the stream (the API's `{errors: [...]}`). */
function streamErrorWords(data: string): string {
  try {
    const words = errorWords(JSON.parse(data));
    if (words.length) return words.join('; ');
  } catch {}
  return data;
}

/**
 * Follows the task's event stream while it is active: opened when the task is waiting or
 * running (again after a retry), closed when it ends or the page goes.
 */
function useTaskEvents(id: string, o: { active: boolean; onTask: (t: Task) => void }) {
  const [timeline, setTimeline] = useState<TimelineEntry[]>([]);
  const [streaming, setStreaming] = useState(false);
  const add = (e: TimelineEntry) => setTimeline((p) => [...p, e].slice(-500));
  useEffect(() => {
    if (!o.active) return;
    const stop = new AbortController();
    setStreaming(true);
    add({ at: Date.now(), text: 'following the task (event stream opened)' });
    const onEvent = (e: SseEvent) => {
      if (e.event === 'task') {
        const t = JSON.parse(e.data) as Task;
        o.onTask(t);
        add({ at: Date.now(), text: describe(t) });
      } else if (e.event === 'error') add({ at: Date.now(), text: streamErrorWords(e.data), error: true });
    };
    sse(`/api/task/${encodeURIComponent(id)}/events`, onEvent, { signal: stop.signal })
      .catch((err: unknown) => add({ at: Date.now(), text: errorMessages(err).join('; '), error: true }))
      .finally(() => {
        if (!stop.signal.aborted) setStreaming(false);
      });
    return () => {
      stop.abort();
      setStreaming(false);
    };
  }, [id, o.active]);
  return { timeline, streaming, add };
}

/** A button that posts an action; its error (the API's words) right beside it. */
function ActionButton(props: { label: string; variant?: 'primary' | 'danger'; run: () => Promise<void> }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const errorId = `task-action-${props.label.toLowerCase()}-error`;
  const click = async () => {
    setBusy(true);
    setError(undefined);
    try {
      await props.run();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="task-action">
      <Button
        variant={props.variant ?? 'secondary'}
        busy={busy}
        onClick={click}
        aria-describedby={error ? errorId : undefined}
      >
        {props.label}
      </Button>
      <ErrorText error={error} id={errorId} />
    </div>
  );
}

function Summary({ task }: { task: Task }) {
  const s = task.status;
  return (
    <dl class="props">
      <dt>ID</dt>
      <dd>
        <code>{task.id}</code>
      </dd>
      <dt>Type</dt>
      <dd>{task.type}</dd>
      <dt>Phase</dt>
      <dd>
        <TaskState task={task} />
      </dd>
      <dt>Created</dt>
      <dd>{dateTime(task.createdAt)}</dd>
      {task.scheduledAt !== undefined && (
        <>
          <dt>Queued</dt>
          <dd>{dateTime(task.scheduledAt)}</dd>
        </>
      )}
      <dt>Updated</dt>
      <dd>{dateTime(s.updatedAt)}</dd>
      <dt>Retries</dt>
      <dd>{s.retries ?? 0}</dd>
      {task.inputAssetId && (
        <>
          <dt>Input asset</dt>
          <dd>
            <a href={href('assets', task.inputAssetId)}>{task.inputAssetId}</a>
          </dd>
        </>
      )}
      {task.outputAssetId && (
        <>
          <dt>Output asset</dt>
          <dd>
            <a href={href('assets', task.outputAssetId)}>{task.outputAssetId}</a>
          </dd>
        </>
      )}
    </dl>
  );
}

function Timeline({ entries, streaming }: { entries: TimelineEntry[]; streaming: boolean }) {
  return (
    <section aria-labelledby="task-timeline">
      <h2 id="task-timeline">Event timeline</h2>
      <p class="hint">
        {streaming
          ? 'Following the task live (GET /api/task/{id}/events).'
          : 'What the event stream said while this page had it open; it closes when the task ends.'}
      </p>
      {entries.length === 0 ? (
        <p class="hint">No events: the task had ended before this page opened.</p>
      ) : (
        <ol class="timeline">
          {entries.map((e, i) => (
            <li key={i} class={e.error ? 'error' : undefined}>
              <time dateTime={new Date(e.at).toISOString()}>{new Date(e.at).toLocaleTimeString()}</time> {e.text}
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}

export function TaskDetail({ id }: { id: string }) {
  const loaded = useLoad(() => api<Task>('GET', `/api/task/${encodeURIComponent(id)}`), [id]);
  const [task, setTask] = useState<Task | undefined>(undefined);
  useEffect(() => setTask(loaded.data), [loaded.data]);
  const active = task !== undefined && isActive(task);
  const events = useTaskEvents(id, { active, onTask: setTask });
  // Where the stream could not open (too many streams: 429) or broke off: GET every 2 s instead.
  const poll = async () => {
    try {
      setTask(await api<Task>('GET', `/api/task/${encodeURIComponent(id)}`));
    } catch {}
  };
  useInterval(() => void poll(), 2000, active && !events.streaming);
  const act = (what: 'cancel' | 'retry') => async () => {
    const t = await api<Task>('POST', `/api/task/${encodeURIComponent(id)}/${what}`);
    setTask(t);
    events.add({
      at: Date.now(),
      text: `${what === 'cancel' ? 'cancelled' : 'retried'} from this page: ${describe(t)}`,
    });
  };
  return (
    <section>
      <h1>Task {task ? <PhaseBadge phase={task.status.phase} /> : null}</h1>
      <p>
        <a href={href('tasks')}>All tasks</a>
      </p>
      <ErrorText error={loaded.error} />
      {!task && loaded.loading && <p role="status">Loading…</p>}
      {task && (
        <>
          <div class="card">
            <Summary task={task} />
            {task.status.errorMessage && (
              <div class="task-failure">
                <h2>Error</h2>
                <p class="error">{task.status.errorMessage}</p>
              </div>
            )}
            <div class="row task-actions">
              {canCancel(task) && <ActionButton label="Cancel" variant="danger" run={act('cancel')} />}
              {canRetry(task) && <ActionButton label="Retry" variant="primary" run={act('retry')} />}
            </div>
          </div>
          <section aria-labelledby="task-params">
            <h2 id="task-params">Params</h2>
            <p class="hint">As the API shows them: credentials never come back (S3 keys as ***).</p>
            <ValueList value={task.params} />
          </section>
          {task.output && (
            <section aria-labelledby="task-output">
              <h2 id="task-output">Output</h2>
              <ValueList value={task.output} />
            </section>
          )}
          <Timeline entries={events.timeline} streaming={events.streaming} />
          <Json value={task} label="the task as JSON" />
        </>
      )}
    </section>
  );
}
