import { Type, type Static } from '@sinclair/typebox';
import { ERROR_MESSAGE } from '../../lib/schema-errors.ts';

// The bodies of POST /api/asset/{id}/export and POST /api/export-data (spec/API.md section C,
// issue #28): Livepeer's `export-task-params` (its SDK's components/exporttaskparams.ts, which
// the SDK 3.5 sends from no method of its own) and the task's `params.exportData`, with one
// field of ours, `ipfs.credentials.proof`: the caller's Storacha delegation (docs/c2pa-dweb.md),
// in the place `storage.credentials.proof` has in POST /api/transcode. Livepeer's `ipfs.pinata`
// (its own Piñata credentials) is refused by name: this server's IPFS is Storacha.

const Proof = Type.Object(
  {
    proof: Type.String({
      minLength: 1,
      maxLength: 65_536,
      description:
        "A base64 UCAN delegation of your Storacha space to this service's agent (`mediaplane agent did`), as `storacha delegation create --base64` prints it. Never shown back.",
    }),
  },
  { additionalProperties: false },
);

const Pinata = Type.Unknown({
  description: "Livepeer's Piñata credentials: refused (this server's IPFS is Storacha).",
});

const ipfsCredentials = {
  credentials: Type.Optional(Proof),
  pinata: Type.Optional(Pinata),
};

/** Livepeer's `ipfs-export-params`, with our `credentials`. */
const IpfsExport = Type.Object(
  {
    nftMetadataTemplate: Type.Optional(
      Type.Literal('file', {
        description: 'The NFT metadata written beside the video: `file` (the only one here).',
        [ERROR_MESSAGE]: 'must be "file" (the "player" template needs a player this server does not have)',
      }),
    ),
    nftMetadata: Type.Optional(
      Type.Record(Type.String(), Type.Unknown(), {
        description: 'Merged into the NFT metadata (ERC-721 style): a null removes a key.',
      }),
    ),
    ...ipfsCredentials,
  },
  {
    additionalProperties: false,
    description:
      "To IPFS through Storacha: your space with `credentials.proof`, or without it the server's (MEDIAPLANE_DWEB_EXPORT_PROOF).",
  },
);

const CustomExport = Type.Object(
  {
    url: Type.String({
      minLength: 1,
      maxLength: 4096,
      description:
        'Where the file is sent: an http:// or https:// URL (a presigned PUT URL, say). Loopback and private addresses are refused unless MEDIAPLANE_ALLOW_PRIVATE_URLS; redirects are not followed.',
    }),
    method: Type.Optional(
      Type.String({
        pattern: '^([Pp][Uu][Tt]|[Pp][Oo][Ss][Tt])$',
        description: 'PUT (the default) or POST.',
        [ERROR_MESSAGE]: 'must be PUT or POST',
      }),
    ),
    headers: Type.Optional(
      Type.Record(Type.String(), Type.String({ maxLength: 8192 }), {
        maxProperties: 64,
        description: 'Sent with the request (an Authorization, say): kept as secrets, never shown or logged.',
      }),
    ),
  },
  { additionalProperties: false, description: 'The file sent by one HTTP request, its Content-Length set.' },
);

export const ExportBody = Type.Object(
  { custom: Type.Optional(CustomExport), ipfs: Type.Optional(IpfsExport) },
  { additionalProperties: false, description: 'Exactly one of `custom` and `ipfs`.' },
);
export type ExportBody = Static<typeof ExportBody>;

export const ExportDataBody = Type.Object(
  {
    content: Type.Record(Type.String(), Type.Unknown(), {
      description: 'The JSON document to put on IPFS, written with its keys sorted (the same document, the same CID).',
    }),
    type: Type.Optional(Type.String({ maxLength: 256, description: 'What the content is (yours to name).' })),
    id: Type.Optional(Type.String({ maxLength: 256, description: 'An id of the content (yours to name).' })),
    ipfs: Type.Optional(
      Type.Object(ipfsCredentials, {
        additionalProperties: false,
        description: "Your Storacha space (`credentials.proof`); without it the server's.",
      }),
    ),
  },
  { additionalProperties: false },
);
export type ExportDataBody = Static<typeof ExportDataBody>;

/** An HTTP header name (RFC 9110 5.1: a token). */
export const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
