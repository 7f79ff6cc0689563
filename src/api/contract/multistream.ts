import { type Static, Type } from '@sinclair/typebox';
import type { MultistreamTargetRecord } from '../../live/index.ts';

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
