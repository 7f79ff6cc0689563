// The API's shapes as the console reads them, taken from the server's wire contracts (the
// API edge's src/api/contract/ and the LLM gateway's route schemas), so that a field the
// server renames or drops is a type error here rather than a blank on a page. This is the one
// file of the console that reads the server's source, and only its types (`import type`): they
// are erased from the bundle, so no server code reaches the browser (the console's
// dependency-cruiser rules check both). `tsc -p console` reads the contract files and what
// they import, under the console's DOM settings.

import type { Static } from '@sinclair/typebox';
import type { PlaybackInfo, PlaybackSource, WireAsset } from '../../src/api/contract/asset.ts';
import type { Capabilities } from '../../src/api/contract/capabilities.ts';
import type { WireMultistreamTarget } from '../../src/api/contract/multistream.ts';
import type { WireSession } from '../../src/api/contract/session.ts';
import type { StreamCreateBody, WireStream } from '../../src/api/contract/stream.ts';
import type { WireTask } from '../../src/api/contract/task.ts';
import type { WEBHOOK_EVENTS, WebhookPatchBody, WireWebhook, WireWebhookLog } from '../../src/api/contract/webhook.ts';
import type { ledgerRoute, modelsRoute } from '../../src/llm/gateway/schemas.ts';

export type { PlaybackInfo, PlaybackSource };

/** GET /api/capabilities: what this server is set up to do (C2PA signing, IPFS exports, its hls.js). */
export type { Capabilities };

/** An asset as GET /api/asset/{id} answers it (spec/API.md section C). */
export type Asset = WireAsset;
export type AssetPhase = Asset['status']['phase'];
/** One track of an asset's source (its `videoSpec.tracks`). */
export type Track = NonNullable<Asset['videoSpec']>['tracks'][number];

/** A task as GET /api/task/{id} answers it (spec/API.md "The Task"). */
export type Task = WireTask;
export type TaskPhase = Task['status']['phase'];

/** A webhook as the API answers it: the secret never comes back, only whether there is one (`signed`). */
export type Webhook = WireWebhook;
/** What the webhook form sends: `sharedSecret` left out keeps an edited webhook's secret, null removes it. */
export type WebhookBody = Required<Pick<WebhookPatchBody, 'name' | 'url' | 'events'>> &
  Pick<WebhookPatchBody, 'sharedSecret'>;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];
/** One delivery attempt of GET /api/webhook/{id}/log. */
export type DeliveryLog = WireWebhookLog;

/** GET /api/ledger (docs/llm.md "Pricing and credits"): what the chat's cost panel shows. */
export type Ledger = Static<(typeof ledgerRoute)['response'][200]>;
export type LedgerEntry = Ledger['entries'][number];

/** GET /v1/models: the models the orchestrators offer, each warm or not, priced or not. */
export type ModelList = Static<(typeof modelsRoute)['response'][200]>;

/** A stream as GET /api/stream/{id} answers its owner (spec/API.md section D): `streamKey` is a secret. */
export type Stream = WireStream;
/** What the console's form sends to POST /api/stream: a name and the ladder (absent: the default; []: the source alone). */
export type StreamBody = Pick<StreamCreateBody, 'name' | 'profiles'>;
/** A session of a stream (GET /api/stream/{id}/sessions): one publish, continued by a reconnect within the window. */
export type Session = WireSession;
/** A saved restream target (GET /api/multistream/target): its url never comes back. */
export type MultistreamTarget = WireMultistreamTarget;
