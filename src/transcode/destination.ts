import { ValidationError } from '../lib/errors.ts';
import type { BuiltinStore } from '../storage/builtin/index.ts';
import { createObjectStore, type ObjectStore, type ObjectStoreFactory, type StorageTarget } from '../storage/index.ts';
import type { Config } from '../config/index.ts';

/** Where a job that names no storage writes in the built-in store: under its task (served at /media/task/<id>/...). */
export const builtinOutputPrefix = (taskId: string): string => `task/${taskId}/`;

/**
 * The store a job's outputs go to: its `storage`, or the built-in store under the task
 * (for a chunked task's pieces, under their parent: issue #30).
 */
export function openDestination(
  deps: {
    config: Config;
    objectStores?: Partial<Record<string, ObjectStoreFactory>> | undefined;
    builtinStore?: BuiltinStore | undefined;
  },
  storage: StorageTarget | undefined,
  taskId: string,
): ObjectStore {
  if (storage) return createObjectStore(storage, deps.config, deps.objectStores);
  if (!deps.builtinStore) throw new ValidationError('storage: this server has no built-in store; name a storage');
  return deps.builtinStore.writer(builtinOutputPrefix(taskId));
}
