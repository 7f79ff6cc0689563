// The webhook events of assets (spec/API.md section C), names only: this file imports nothing,
// so the console bundles it for its webhook form (console/.dependency-cruiser.cjs,
// the-registry-stays-names).

/**
 * Written into the outbox of task events (task_events) by migration 010's asset_event:
 * `task_id` holds the asset's id and `task` the asset row as JSON (AssetRow's columns, its
 * times as ISO strings).
 */
export const ASSET_EVENT_NAMES = [
  'asset.created',
  'asset.updated',
  'asset.ready',
  'asset.failed',
  'asset.deleted',
] as const;
export type AssetEventName = (typeof ASSET_EVENT_NAMES)[number];
