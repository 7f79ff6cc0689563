import { defineSettings } from './types.ts';

// Settings of private playback: how the API checks the playback JWTs of assets
// with playbackPolicy jwt (access/jwt.ts). In the `storage` group, beside the built-in
// store's settings: /media, which serves that store, is where the tokens are checked.
export const accessSettings = defineSettings({
  jwtMaxLifetimeSecs: {
    env: 'MEDIAPLANE_JWT_MAX_LIFETIME_SECS',
    type: 'int',
    group: 'storage',
    default: 86_400,
    defaultText: "86400 (one day: the livepeer SDK's signAccessJwt default)",
    min: 60,
    max: 315_360_000,
    description:
      'The longest a playback JWT may be valid for: one whose exp is further than this after its iat (or after now, without iat) is refused with a 401 saying so.',
  },
});
