-- Split tasks that ended failed or cancelled and may have left their pieces' files in the
-- built-in store (issue #30): the retention sweep finds them here, removes the files and
-- clears split_progress, which takes the row out of this index.
CREATE INDEX tasks_ended_splits ON tasks (updated_at)
  WHERE parent_id IS NULL AND split_progress IS NOT NULL AND phase IN ('failed', 'cancelled')
;
