// What a task change is called on the wire (Livepeer's task webhook events), names only: this
// file imports nothing, so the console bundles it for its webhook form
// (console/.dependency-cruiser.cjs, the-registry-stays-names).

export const TASK_EVENT_NAMES = ['task.spawned', 'task.updated', 'task.completed', 'task.failed'] as const;
export type TaskEventName = (typeof TASK_EVENT_NAMES)[number];
