// A stream's actions: suspend or resume (PATCH suspended: a suspended stream's key is refused,
// and a live publisher is cut off), and delete after an inline confirmation (ConfirmDelete).

import { api } from '../api.ts';
import { Button, ConfirmDelete, ErrorText } from '../components/index.ts';
import { useAction } from '../hooks.ts';
import { navigate } from '../router.ts';
import type { Stream } from '../wire.ts';

function Suspend({ stream, onChanged }: { stream: Stream; onChanged(): Promise<void> }) {
  const {
    busy,
    error,
    run: toggle,
  } = useAction(async () => {
    await api('PATCH', `/api/stream/${encodeURIComponent(stream.id)}`, { suspended: !stream.suspended });
    await onChanged();
  });
  return (
    <div>
      <p class="hint">
        {stream.suspended
          ? 'Suspended: publishing with its key is refused.'
          : 'Suspending refuses its key and cuts off a publisher that is live now.'}
      </p>
      <Button busy={busy} onClick={toggle} aria-describedby="suspend-error">
        {stream.suspended ? 'Resume stream' : 'Suspend stream'}
      </Button>
      <ErrorText error={error} id="suspend-error" />
    </div>
  );
}

function Delete({ stream }: { stream: Stream }) {
  const remove = async () => {
    await api('DELETE', `/api/stream/${encodeURIComponent(stream.id)}`);
    navigate('streams');
  };
  const question = (
    <>
      Delete “{stream.name}”? Its key stops working{stream.isActive ? ' and its live publisher is cut off' : ''}. This
      cannot be undone.
    </>
  );
  return <ConfirmDelete label="Delete stream" question={question} remove={remove} />;
}

export function StreamActions({ stream, onChanged }: { stream: Stream; onChanged(): Promise<void> }) {
  return (
    <section class="card stream-actions" aria-labelledby="actions-h">
      <h2 id="actions-h">Suspend or delete</h2>
      <Suspend stream={stream} onChanged={onChanged} />
      <Delete stream={stream} />
    </section>
  );
}
