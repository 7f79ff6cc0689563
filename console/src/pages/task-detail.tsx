// One task as a person reads it: what it worked on (the input, the asset by name), its state,
// error words and retries, its outputs as links with human sizes (task-view.tsx), its event
// timeline, and its params (as the API shows them: secrets already redacted). The timeline is
// the task's stored events (GET /api/task/{id}/history: what its webhooks got, kept after it
// ended), followed by what GET /api/task/{id}/events says while the task is active (the
// stream ends when the task does; a retry opens it again). Cancel and retry answer with the
// task, or with the API's words next to the button.

import { useEffect, useState } from 'preact/hooks';
import { api, errorWords, type SseEvent, sse } from '../api.ts';
import { Button, ErrorText, errorMessages, Json, PhaseBadge, ValueList } from '../components/index.ts';
import { dateTime } from '../format.ts';
import { useInterval, useLoad } from '../hooks.ts';
import { href } from '../router.ts';
import type { ClientTaskType } from '../../../src/tasks/task-types.ts';
import { isActive } from '../phases.ts';
import { useAssetNames } from '../widgets/asset-names.ts';
import type { Task } from '../wire.ts';
import { canCancel, canRetry, TaskState } from './task-parts.tsx';
import { type AssetNames, InputText, paramsShown, TaskOutputs, taskTitle } from './task-view.tsx';

interface TimelineEntry {
  at: number;
  text: string;
  /** The stored event's name (task.updated...); none for what this page saw itself. */
  event?: string;
  error?: boolean;
}

interface StoredEvent {
  id: string;
  event: string;
  createdAt: number;
  task: Task;
}

interface Stored {
  entries: TimelineEntry[];
  /** When this page asked for them (its own clock, as the live entries' times are). */
  since: number;
}

/** The stored events, read again whenever `phase` changes (a task that ends has written its last one). */
function useStoredEvents(id: string, phase: string | undefined) {
  return useLoad(async (): Promise<Stored | undefined> => {
    if (phase === undefined) return undefined;
    const since = Date.now();
    const events = await api<StoredEvent[]>('GET', `/api/task/${encodeURIComponent(id)}/history`);
    const entries = events.map((e) => ({
      at: e.createdAt,
      event: e.event,
      text: describe(e.task),
      error: e.event === 'task.failed',
    }));
    return { entries, since };
  }, [id, phase]);
}

/** The task's type as a title says it. */
const TYPE_WORDS: Record<ClientTaskType, string> = {
  'transcode-file': 'Transcode',
  upload: 'Upload',
  clip: 'Clip',
  export: 'Export',
  'export-data': 'Export of data',
};

const typeWords = (type: string): string => (TYPE_WORDS as Record<string, string | undefined>)[type] ?? type;

function describe(t: Task): string {
  const s = t.status;
  const parts: string[] = [s.phase];
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

function Summary({ task, names }: { task: Task; names: AssetNames }) {
  const s = task.status;
  return (
    <dl class="props">
      <dt>Input</dt>
      <dd>
        <InputText task={task} names={names} />
      </dd>
      {task.outputAssetId && (
        <>
          <dt>Asset</dt>
          <dd>
            <a href={href('assets', task.outputAssetId)}>{names.get(task.outputAssetId) ?? task.outputAssetId}</a>
          </dd>
        </>
      )}
      <dt>Type</dt>
      <dd>{task.type}</dd>
      <dt>Phase</dt>
      <dd>
        <TaskState task={task} />
      </dd>
      <dt>Created</dt>
      <dd>{dateTime(task.createdAt)}</dd>
      <dt>Updated</dt>
      <dd>{dateTime(s.updatedAt)}</dd>
      {(s.retries ?? 0) > 0 && (
        <>
          <dt>Retries</dt>
          <dd>{s.retries}</dd>
        </>
      )}
      <dt>ID</dt>
      <dd>
        <code>{task.id}</code>
      </dd>
    </dl>
  );
}

function Timeline(props: { stored: Stored | undefined; live: TimelineEntry[]; streaming: boolean; error: unknown }) {
  // What the stream said since the stored events were read; what came before is in them.
  const since = props.stored?.since ?? 0;
  const entries: TimelineEntry[] = [];
  // The stream starts with the task as it is: no second line when nothing changed.
  for (const e of [...(props.stored?.entries ?? []), ...props.live.filter((l) => l.at >= since)])
    if (e.event !== undefined || e.text !== entries.at(-1)?.text) entries.push(e);
  return (
    <section aria-labelledby="task-timeline">
      <h2 id="task-timeline">Event timeline</h2>
      <p class="hint">
        {props.streaming
          ? 'The stored events, then the task live as this page follows it.'
          : 'The events the task wrote (what its webhooks got).'}
      </p>
      <ErrorText error={props.error} />
      {props.stored === undefined && !props.error ? (
        <p role="status" class="hint">
          Loading the events…
        </p>
      ) : entries.length === 0 ? (
        <p class="hint">No stored events: they are kept for a week by default.</p>
      ) : (
        <ol class="timeline">
          {entries.map((e, i) => (
            <li key={i} class={e.error ? 'error' : undefined}>
              <time dateTime={new Date(e.at).toISOString()}>{new Date(e.at).toLocaleTimeString()}</time>{' '}
              {e.event && <code>{e.event}</code>} {e.text}
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
  const stored = useStoredEvents(id, task?.status.phase);
  const names = useAssetNames([task?.outputAssetId, task?.inputAssetId], true);
  const title = task ? taskTitle(task, names) : undefined;
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
      <h1>
        {task ? `${typeWords(task.type)}${title ? `: ${title}` : ''}` : 'Task'}{' '}
        {task ? <PhaseBadge phase={task.status.phase} /> : null}
      </h1>
      <p>
        <a href={href('tasks')}>← All tasks</a>
      </p>
      <ErrorText error={loaded.error} />
      {!task && loaded.loading && <p role="status">Loading…</p>}
      {task && (
        <>
          <div class="card">
            <Summary task={task} names={names} />
            {task.status.errorMessage && (
              <div class="task-failure">
                <h2>Error</h2>
                <p class="error">{task.status.errorMessage}</p>
              </div>
            )}
            {(canCancel(task) || canRetry(task)) && (
              <div class="row task-actions">
                {canCancel(task) && <ActionButton label="Cancel" variant="danger" run={act('cancel')} />}
                {canRetry(task) && <ActionButton label="Retry" variant="primary" run={act('retry')} />}
              </div>
            )}
          </div>
          {task.output && (
            <section aria-labelledby="task-output">
              <h2 id="task-output">Outputs</h2>
              <TaskOutputs task={task} names={names} />
            </section>
          )}
          <Timeline stored={stored.data} live={events.timeline} streaming={events.streaming} error={stored.error} />
          <section aria-labelledby="task-params">
            <h2 id="task-params">Params</h2>
            <p class="hint">As the API shows them: credentials never come back (S3 keys as ***).</p>
            <ValueList value={paramsShown(task)} />
          </section>
          <Json value={task} label="the task as JSON" />
        </>
      )}
    </section>
  );
}
