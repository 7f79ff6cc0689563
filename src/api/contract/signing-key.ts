import { Type, type Static } from '@sinclair/typebox';
import type { SigningKey } from '../../access/index.ts';

// The wire contract of the signing-key routes (issue #28, spec/API.md section C): Livepeer
// Studio's, as the `livepeer` SDK sends and parses them (its model components/signingkey.ts
// and operations/*signingkey*.ts; accessControl.create sends no body at all, and update
// {name?, disabled?}). The private key is in the create answer only (the SDK's model drops
// it; plain HTTP clients read it there, once).

const KeyName = Type.String({ minLength: 1, maxLength: 256, description: 'A name for the key.' });

/** POST: Livepeer's new-signing-key-payload; the SDK sends no body, which reads as null. */
export const SigningKeyCreateBody = Type.Union(
  [Type.Object({ name: Type.Optional(KeyName) }, { additionalProperties: false }), Type.Null()],
  { description: 'Optional: without a name the key is "Signing Key <n>".' },
);
export type SigningKeyCreateBody = Static<typeof SigningKeyCreateBody>;

export const SigningKeyPatchBody = Type.Object(
  {
    name: Type.Optional(KeyName),
    disabled: Type.Optional(
      Type.Boolean({
        description: 'A disabled key signs no playback: tokens it signed are refused from the next request on.',
      }),
    ),
  },
  { additionalProperties: false },
);
export type SigningKeyPatchBody = Static<typeof SigningKeyPatchBody>;

const ms = { description: 'ms since the epoch' };

export const SigningKeySchema = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    createdAt: Type.Number(ms),
    lastSeen: Type.Optional(Type.Number({ description: 'When a token it signed last opened a playback (ms).' })),
    publicKey: Type.String({
      description: "Base64 of the public key's PEM (SPKI): a JWT names its key with it in its `pub` claim.",
    }),
    disabled: Type.Boolean(),
    projectId: Type.String(),
  },
  { additionalProperties: false },
);

export const CreatedSigningKeySchema = Type.Object(
  {
    ...SigningKeySchema.properties,
    privateKey: Type.String({
      description:
        "Base64 of the private key's PEM (PKCS#8), for signing ES256 JWTs: shown in this answer only and never stored; keep it now.",
    }),
  },
  { additionalProperties: false },
);

export interface WireSigningKey {
  id: string;
  name: string;
  createdAt: number;
  lastSeen?: number;
  publicKey: string;
  disabled: boolean;
  projectId: string;
}

/** The SigningKey of Livepeer's SDK for a stored key. */
export function toWireSigningKey(k: SigningKey): WireSigningKey {
  const wire: WireSigningKey = {
    id: k.id,
    name: k.name,
    createdAt: new Date(k.createdAt).getTime(),
    publicKey: k.publicKey,
    disabled: k.disabled,
    projectId: k.projectId,
  };
  if (k.lastSeen !== null) wire.lastSeen = new Date(k.lastSeen).getTime();
  return wire;
}
