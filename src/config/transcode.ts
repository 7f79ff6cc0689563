import { defineSettings } from './types.ts';

// Settings of the transcode domain (see types.ts for the shape of an entry).
export const transcodeSettings = defineSettings({
});
