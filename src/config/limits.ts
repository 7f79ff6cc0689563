import { defineSettings } from './types.ts';

// Settings of key limits. The limits themselves are per key and owner, in the
// database (`mediaplane keys create|update`, `mediaplane keys owner-limits`); these say how they are counted.
export const limitSettings = defineSettings({
  rateWindowMs: {
    env: 'MEDIAPLANE_RATE_WINDOW_MS',
    type: 'int',
    group: 'server',
    default: 60_000,
    min: 100,
    max: 86_400_000,
    description:
      'The length of a key\'s rate window: requests and tokens "per minute" are per this many ms (windows aligned on the database\'s clock, shared by every process).',
  },
  authFailuresPerMinute: {
    env: 'MEDIAPLANE_AUTH_FAILURES_PER_MINUTE',
    type: 'int',
    group: 'server',
    default: 20,
    min: 1,
    max: 1_000_000,
    description:
      'Requests with a bad API key answered 401 per client address and rate window; later ones in the window are 429 (a good key is never refused for its address).',
  },
});
