import { defineSettings } from './types.ts';

// Settings of the c2pa domain (see types.ts for the shape of an entry). Both files or
// neither: without them `c2pa: true` is refused with 422.
export const c2paSettings = defineSettings({
  c2paKey: {
    env: 'MEDIAPLANE_C2PA_KEY',
    type: 'string',
    group: 'c2pa',
    default: undefined,
    defaultText: 'unset: C2PA signing off',
    description: 'PEM file with the private key that signs C2PA manifests (EC P-256/384/521, Ed25519 or RSA-PSS).',
  },
  c2paCerts: {
    env: 'MEDIAPLANE_C2PA_CERTS',
    type: 'string',
    group: 'c2pa',
    default: undefined,
    defaultText: 'unset: C2PA signing off',
    description:
      'PEM file with the signing certificate chain, leaf first; checked against the C2PA certificate rules at start-up.',
  },
  c2paTrustAnchors: {
    env: 'MEDIAPLANE_C2PA_TRUST_ANCHORS',
    type: 'string',
    group: 'c2pa',
    default: undefined,
    defaultText: 'the last certificate of the chain when it is self-signed',
    description: 'PEM file of root certificates the start-up self-check validates the chain against.',
  },
});
