import { ValidationError } from '../lib/errors.ts';
import type { BuiltinStore } from '../storage/builtin/index.ts';
import { createObjectStore, type ObjectStore, type ObjectStoreFactory, type StorageTarget } from '../storage/index.ts';
import type { Config } from '../config/index.ts';

/** Where a job that names no storage writes in the built-in store: under its task (served at /media/task/<id>/...). */
export const builtinOutputPrefix = (taskId: string): string => `task/${taskId}/`;

/**
 * Where a job's outputs go: a storage the request named, or a folder of the built-in store
 * (`builtinPrefix`: an asset's `asset/<playbackId>/`); neither: the built-in store under the task.
 */
export interface OutputPlace {
  storage?: StorageTarget | undefined;
  builtinPrefix?: string | undefined;
}

/**
 * The store a job's outputs go to, at its place; `taskId` is the task the outputs belong to
 * (for a chunked task's pieces, their parent).
 */
export function openDestination(
  deps: {
    config: Config;
    objectStores?: Partial<Record<string, ObjectStoreFactory>> | undefined;
    builtinStore?: BuiltinStore | undefined;
  },
  place: OutputPlace,
  taskId: string,
): ObjectStore {
  if (place.storage) return createObjectStore(place.storage, deps.config, deps.objectStores);
  if (!deps.builtinStore) throw new ValidationError('storage: this server has no built-in store; name a storage');
  return deps.builtinStore.writer(place.builtinPrefix ?? builtinOutputPrefix(taskId));
}
