// Tasks: every type (the task types' registry, src/tasks/task-types.ts), newest first, each
// named by its asset (one GET /api/asset for the names) or its input's file name.
// Live progress on the list by polling GET /api/task every 2 s while a loaded task is waiting
// or running and the tab is visible: one request however many tasks run, where an SSE stream
// per task would use up the owner's 32 streams (docs/webhooks.md). One task's page follows it
// through SSE instead (task-detail.tsx). The API filters nothing, so the phase and type
// filters apply to the tasks loaded so far; "Load more" follows the Link header's cursor.

import { useEffect, useId, useState } from 'preact/hooks';
import { apiRaw, nextLink } from '../api.ts';
import { Button, ErrorText, Field } from '../components/index.ts';
import { dateTime } from '../format.ts';
import { useInterval, useVisible } from '../hooks.ts';
import { href, type PageProps } from '../router.ts';
import { TaskDetail } from './task-detail.tsx';
import { CLIENT_TASK_TYPES } from '../../../src/tasks/task-types.ts';
import { isActive, TASK_PHASES } from '../phases.ts';
import { useAssetNames } from '../widgets/asset-names.ts';
import type { Task } from '../wire.ts';
import { shortId, TaskState } from './task-parts.tsx';
import { taskTitle } from './task-view.tsx';

const PAGE = 20;
const POLL_MS = 2000;

/** `#/tasks` lists them, `#/tasks/ID` shows one. */
export function TasksPage({ route }: PageProps) {
  return route[0] ? <TaskDetail id={route[0]} /> : <TaskList />;
}

/** Fresh first tasks over the ones loaded: a task in both takes the fresh copy, order newest first. */
function merge(fresh: Task[], loaded: Task[]): Task[] {
  const ids = new Set(fresh.map((t) => t.id));
  return [...fresh, ...loaded.filter((t) => !ids.has(t.id))].sort((a, b) => b.createdAt - a.createdAt);
}

interface ListState {
  tasks: Task[];
  next: string | undefined;
  loading: boolean;
  error: unknown;
}

function useTaskList() {
  const [s, setS] = useState<ListState>({ tasks: [], next: undefined, loading: true, error: undefined });
  const read = async (path: string) => {
    const res = await apiRaw('GET', path);
    return { tasks: (await res.json()) as Task[], next: nextLink(res) };
  };
  const first = async () => {
    setS((p) => ({ ...p, loading: true }));
    try {
      const page = await read(`/api/task?limit=${PAGE}`);
      setS({ tasks: page.tasks, next: page.next, loading: false, error: undefined });
    } catch (error) {
      setS((p) => ({ ...p, loading: false, error }));
    }
  };
  const more = async () => {
    if (!s.next) return;
    setS((p) => ({ ...p, loading: true }));
    try {
      const page = await read(s.next);
      setS((p) => ({ tasks: merge(p.tasks, page.tasks), next: page.next, loading: false, error: undefined }));
    } catch (error) {
      setS((p) => ({ ...p, loading: false, error }));
    }
  };
  // Re-reads as many of the newest as are loaded (up to the API's 100), keeping older pages.
  const refresh = async () => {
    try {
      const limit = Math.min(100, Math.max(PAGE, s.tasks.length));
      const page = await read(`/api/task?limit=${limit}`);
      setS((p) => ({ ...p, tasks: merge(page.tasks, p.tasks), error: undefined }));
    } catch (error) {
      setS((p) => ({ ...p, error }));
    }
  };
  useEffect(() => {
    void first();
  }, []);
  const live = useVisible() && s.tasks.some(isActive);
  useInterval(() => void refresh(), POLL_MS, live);
  return { ...s, live, more, reload: first };
}

function Filters(props: { phase: string; type: string; onPhase: (v: string) => void; onType: (v: string) => void }) {
  const phaseId = useId();
  const typeId = useId();
  return (
    <div class="row task-filters">
      <Field id={phaseId} label="Phase">
        <select id={phaseId} value={props.phase} onChange={(e) => props.onPhase(e.currentTarget.value)}>
          <option value="">Any phase</option>
          {TASK_PHASES.map((p) => (
            <option key={p} value={p}>
              {p}
            </option>
          ))}
        </select>
      </Field>
      <Field id={typeId} label="Type">
        <select id={typeId} value={props.type} onChange={(e) => props.onType(e.currentTarget.value)}>
          <option value="">Any type</option>
          {CLIENT_TASK_TYPES.map((t) => (
            <option key={t} value={t}>
              {t}
            </option>
          ))}
        </select>
      </Field>
    </div>
  );
}

function TaskRows({ tasks }: { tasks: Task[] }) {
  const names = useAssetNames(tasks.flatMap((t) => [t.outputAssetId, t.inputAssetId]));
  return (
    <table class="task-table">
      <thead>
        <tr>
          <th scope="col">Task</th>
          <th scope="col">Type</th>
          <th scope="col">Phase</th>
          <th scope="col">Created</th>
          <th scope="col">Error</th>
        </tr>
      </thead>
      <tbody>
        {tasks.map((t) => (
          <tr key={t.id}>
            <td data-label="Task" class="task-name">
              <a href={href('tasks', t.id)}>
                <span>{taskTitle(t, names) ?? t.type}</span> <code class="hint">{shortId(t.id)}</code>
              </a>
            </td>
            <td data-label="Type">{t.type}</td>
            <td data-label="Phase">
              <TaskState task={t} />
            </td>
            <td data-label="Created">{dateTime(t.createdAt)}</td>
            <td data-label="Error" class="task-error">
              {t.status.errorMessage ?? ''}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function TaskList() {
  const list = useTaskList();
  const [phase, setPhase] = useState('');
  const [type, setType] = useState('');
  const shown = list.tasks.filter((t) => (!phase || t.status.phase === phase) && (!type || t.type === type));
  const filtered = phase !== '' || type !== '';
  return (
    <section>
      <h1>Tasks</h1>
      <p class="hint">
        Every task of this key's owner, newest first.{' '}
        {list.live ? 'Running tasks update every 2 seconds.' : 'No task is running.'}
      </p>
      <Filters phase={phase} type={type} onPhase={setPhase} onType={setType} />
      <p role="status" class="hint">
        {list.loading && list.tasks.length === 0
          ? 'Loading tasks…'
          : `${shown.length} of ${list.tasks.length} loaded task${list.tasks.length === 1 ? '' : 's'} shown` +
            (filtered && list.next ? ' (the filters apply to the loaded tasks: load more to look further)' : '')}
      </p>
      <ErrorText error={list.error} />
      {shown.length > 0 && <TaskRows tasks={shown} />}
      {!list.loading && list.tasks.length === 0 && !list.error && (
        <p>No tasks yet: upload a video or send POST /api/transcode.</p>
      )}
      <div class="row">
        {list.next && <Button onClick={list.more}>Load more</Button>}
        <Button onClick={list.reload}>Refresh</Button>
      </div>
    </section>
  );
}
