import { type Static, Type } from '@sinclair/typebox';
import { type MultistreamTargetRecord, type StreamRow, streamFromRow } from '../../live/index.ts';
import { toWireStream } from './stream.ts';

// The wire shapes of saved restream targets (spec/API.md section D, Livepeer's
// `/multistream/target`): a target's url holds the other service's stream key, so it is taken
// in and never given back; the `livepeer` SDK's MultistreamTarget has no url either.

const Name = Type.String({ minLength: 1, maxLength: 256 });
const Url = Type.String({
  minLength: 1,
  maxLength: 2048,
  description: "rtmp://, rtmps:// or srt://; a secret (it holds the other service's key): never shown back.",
});
const Disabled = Type.Boolean({ description: 'Kept on its streams, but nothing is pushed to it.' });

export const MultistreamTargetCreateBody = Type.Object(
  { name: Type.Optional(Name), url: Url, disabled: Type.Optional(Disabled) },
  { additionalProperties: false },
);
export type MultistreamTargetCreateBody = Static<typeof MultistreamTargetCreateBody>;

/** The SDK always sends `url`; a plain HTTP caller may change the name or `disabled` alone. */
export const MultistreamTargetPatchBody = Type.Object(
  { name: Type.Optional(Name), url: Type.Optional(Url), disabled: Type.Optional(Disabled) },
  { additionalProperties: false },
);
export type MultistreamTargetPatchBody = Static<typeof MultistreamTargetPatchBody>;

export const MultistreamTargetSchema = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    disabled: Type.Boolean(),
    createdAt: Type.Number({ description: 'Unix ms.' }),
  },
  { additionalProperties: false },
);
export type WireMultistreamTarget = Static<typeof MultistreamTargetSchema>;

/** A target as the routes show it: no url. */
export function toWireTarget(t: MultistreamTargetRecord): WireMultistreamTarget {
  return { id: t.id, name: t.name ?? '', disabled: t.disabled, createdAt: t.createdAt.getTime() };
}

/** The name of a target made without one: its scheme and host (the key is in the path or query, never here). */
export function defaultTargetName(url: string): string {
  const u = new URL(url);
  return `${u.protocol}//${u.host}`;
}

/** Whether an outbox event is a restream target's (multistream.connected, .error, .disconnected). */
export const isMultistreamEvent = (e: { event: string }): boolean => e.event.startsWith('multistream.');

interface MultistreamEventTask {
  stream: StreamRow;
  target?: { id?: unknown; name?: unknown; profile?: unknown; videoOnly?: unknown };
}

/**
 * The payload of a multistream.* event: `{stream, target}`, the stream as GET /api/stream/{id}
 * shows it (no key) and the target as the stream lists it, with its name (never its url: the
 * outbox never holds it, live_event's caller leaves it out).
 */
export function multistreamEventPayload(e: { task: unknown }): Record<string, unknown> {
  const task = e.task as MultistreamEventTask;
  const t = task.target ?? {};
  const target = {
    id: String(t.id ?? ''),
    ...(typeof t.name === 'string' ? { name: t.name } : {}),
    profile: String(t.profile ?? ''),
    videoOnly: t.videoOnly === true,
  };
  return { stream: toWireStream(streamFromRow(task.stream)), target };
}
