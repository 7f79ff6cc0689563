import { defineSettings } from './types.ts';

// Settings of the dweb domain (see types.ts for the shape of an entry).
export const dwebSettings = defineSettings({
});
