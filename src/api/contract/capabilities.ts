import { type Static, Type } from '@sinclair/typebox';

// The wire shape of GET /api/capabilities (api/capabilities-routes.ts): what this server is set
// up to do, for a client (the console) to offer only that and to explain, with the settings'
// names, what enabling the rest takes.

const Feature = (description: string) =>
  Type.Object(
    {
      enabled: Type.Boolean({ description: 'Whether requests for it are accepted by this server now' }),
      settings: Type.Array(Type.String(), {
        description: "The server settings (environment variables) that enable it; set by the server's operator",
      }),
      about: Type.String({ description: 'What it takes to enable, in a sentence' }),
    },
    { description, additionalProperties: false },
  );

export const Capabilities = Type.Object(
  {
    c2pa: Feature('`c2pa: true` on POST /api/transcode, /api/asset/request-upload and /api/asset/upload/url'),
    ipfsExport: Type.Composite(
      [
        Feature("POST /api/asset/{id}/export `{ipfs: {}}`: to the server's own Storacha space"),
        Type.Object({
          ownProof: Type.Boolean({
            description:
              "An export that brings its own delegation to the server's agent (`ipfs.credentials.proof`) is accepted",
          }),
        }),
      ],
      { additionalProperties: false },
    ),
    player: Type.Object(
      {
        hlsJsUrl: Type.String({
          description: "This server's copy of hls.js (a classic script defining `Hls`), for pages that embed a player",
        }),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);
export type Capabilities = Static<typeof Capabilities>;
