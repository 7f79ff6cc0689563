-- Pieces (issue #30): a task whose handler splits it (ctx.split, src/tasks/pieces.ts) becomes
-- a parent of child rows in `tasks`, each a normal leased job (own lease, heartbeats, crash
-- budget, retries). A piece is internal: it writes no task events, is neither listed nor
-- readable as a task through the API, and does not count against its owner's queued tasks
-- (its parent does, once). `piece_last` marks the piece that waits (phase `pending`) until
-- every other piece has completed and whose output becomes the parent's (the stitch).
ALTER TABLE tasks ADD COLUMN parent_id uuid REFERENCES tasks(id)
;
ALTER TABLE tasks ADD COLUMN piece_label text
;
ALTER TABLE tasks ADD COLUMN piece_weight double precision
;
ALTER TABLE tasks ADD COLUMN piece_last boolean NOT NULL DEFAULT false
;
-- The parent's progress when it split (its probe and analysis): its progress from then on is
-- this plus the rest times the weighted sum of its pieces' progress.
ALTER TABLE tasks ADD COLUMN split_progress double precision
;
-- The worker that claimed the task last (the pieces view shows where each piece ran).
ALTER TABLE tasks ADD COLUMN last_worker text
;
-- A parent's pieces in their queue order (created_at is the parent's plus the piece's index
-- in microseconds, so pieces sort among all tasks where their parent stood).
CREATE INDEX tasks_pieces ON tasks (parent_id, created_at) WHERE parent_id IS NOT NULL
;
-- The owner-facing indexes hold no pieces: an owner's list and queue limit never walk them.
DROP INDEX tasks_queued_by_owner
;
CREATE INDEX tasks_queued_by_owner ON tasks (owner) WHERE phase IN ('pending', 'waiting', 'running') AND parent_id IS NULL
;
DROP INDEX tasks_by_owner
;
CREATE INDEX tasks_by_owner ON tasks (owner, created_at DESC, id DESC) WHERE parent_id IS NULL
;
