// The task types a client creates, named once. The worker's handlers (main.ts), the wire
// shapes (api/contract/index.ts), usage and the key limits take their names and lists from
// here; the SQL of the migrations that names them is checked against these lists by a test
// (test/tasks/task-types.test.ts), as migrations already applied cannot change.

/** Each task type a client creates, by what it does. */
export const TASK_TYPES = {
  /** POST /api/transcode: a file in, renditions out to the caller's storage. */
  transcode: 'transcode-file',
  /** An asset's upload or import, processed into its renditions. */
  upload: 'upload',
  /** A range of an asset cut into a new asset. */
  clip: 'clip',
  /** An asset's files exported (IPFS). */
  export: 'export',
  /** A JSON document exported (IPFS). */
  exportData: 'export-data',
} as const;
export type ClientTaskType = (typeof TASK_TYPES)[keyof typeof TASK_TYPES];

/** Every type a client creates (a chunked task's pieces are rows of their parent, not tasks of their own). */
export const CLIENT_TASK_TYPES: readonly ClientTaskType[] = Object.values(TASK_TYPES);

/** Whether a stored row's `type` is one a client creates. */
export function isClientTaskType(type: string): type is ClientTaskType {
  return (CLIENT_TASK_TYPES as readonly string[]).includes(type);
}

/**
 * The types that encode media: a key's concurrent-transcodes limit counts them, and their
 * output holds the input's duration (usage's minutes transcoded).
 */
export const ENCODING_TASK_TYPES: readonly ClientTaskType[] = [
  TASK_TYPES.transcode,
  TASK_TYPES.upload,
  TASK_TYPES.clip,
];

/** The types that make an asset, which follows its task's phase (migration 010's trigger). */
export const ASSET_TASK_TYPES: readonly ClientTaskType[] = [TASK_TYPES.upload, TASK_TYPES.clip];
